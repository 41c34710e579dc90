package journal

import (
	"fmt"
	"strings"
)

// SubjectMatches reports whether subject matches filter under NATS wildcard
// rules: "*" matches exactly one token, ">" (last token only) one or more.
//
// It is the same test the server applies to next_by_subj, exported so the
// caller's wake index and this package's ring agree on what a filter
// selects. It does not allocate.
func SubjectMatches(filter, subject string) bool {
	for {
		if filter == ">" {
			return subject != ""
		}
		fi := strings.IndexByte(filter, '.')
		si := strings.IndexByte(subject, '.')
		ft, st := filter, subject
		if fi >= 0 {
			ft = filter[:fi]
		}
		if si >= 0 {
			st = subject[:si]
		}
		if st == "" || (ft != "*" && ft != st) {
			return false
		}
		if fi < 0 || si < 0 {
			return fi < 0 && si < 0
		}
		filter, subject = filter[fi+1:], subject[si+1:]
	}
}

// validateFilter refuses filters the server would refuse or read as
// something else, so a typo fails at the read that made it instead of
// turning into an empty page forever.
func validateFilter(filter string) error {
	if filter == "" {
		return fmt.Errorf("journal: subject filter is empty")
	}
	if strings.ContainsAny(filter, " \t\r\n") {
		return fmt.Errorf("journal: subject filter %q contains whitespace", filter)
	}
	tokens := strings.Split(filter, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return fmt.Errorf("journal: subject filter %q has an empty token", filter)
		case tok == ">" && i != len(tokens)-1:
			return fmt.Errorf("journal: subject filter %q has \">\" before its last token", filter)
		case len(tok) > 1 && strings.ContainsAny(tok, "*>"):
			return fmt.Errorf("journal: subject filter %q has a wildcard inside token %q", filter, tok)
		}
	}
	return nil
}

// validateStreamName refuses names that cannot be a token of an API subject.
func validateStreamName(name string) error {
	if name == "" {
		return fmt.Errorf("journal: stream name is empty")
	}
	if strings.ContainsAny(name, ".*> \t\r\n") {
		return fmt.Errorf("journal: stream name %q contains '.', '*', '>' or whitespace", name)
	}
	return nil
}
