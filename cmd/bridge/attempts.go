package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/attempt"
)

func cmdAttempts(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	seq := fs.Uint64("seq", 0, "only the attempts for this stream sequence")
	limit := fs.Int("limit", 0, "attempts to show, newest first (1-1000; default 100)")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	var id string
	switch rest := fs.Args(); {
	case len(rest) > 1:
		return usagef("unexpected argument %q (flags must precede arguments)", rest[1])
	case len(rest) == 1:
		id = rest[0]
	case !isSet(fs, "seq"):
		return usagef("give a registration ID, --seq N, or both")
	}
	if *limit < 0 || *limit > attempt.MaxLimit {
		return usagef("--limit must be from 1 to %d, not %d", attempt.MaxLimit, *limit)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	// With --seq the sequence's own read answers, narrowed to ID when one
	// is given: one filtered read either way.
	q := url.Values{}
	path := "/v1/attempts"
	if isSet(fs, "seq") {
		q.Set("seq", strconv.FormatUint(*seq, 10))
	} else {
		path = registrationPath(id) + "/attempts"
		if *limit != 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
	}
	data, err := c.call(ctx, "GET", path+"?"+q.Encode(), nil, nil)
	if err != nil {
		return err
	}
	var page admin.AttemptPage
	if err := decodeAnswer(data, &page); err != nil {
		return err
	}
	narrowed := isSet(fs, "seq") && (id != "" || *limit != 0)
	if narrowed {
		page.Attempts = narrow(page.Attempts, id, *limit)
	}
	switch {
	case cf.json && narrowed:
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		return enc.Encode(admin.AttemptList{Attempts: page.Attempts})
	case cf.json:
		_, err := s.out.Write(data)
		return err
	}
	return printAttempts(s.out, page.Attempts)
}

// narrow keeps registration id's attempts (all with id empty), at most
// limit of them (all with 0).
func narrow(in []attempt.Attempt, id string, limit int) []attempt.Attempt {
	out := []attempt.Attempt{}
	for _, a := range in {
		if (id == "" || a.Registration == id) && (limit == 0 || len(out) < limit) {
			out = append(out, a)
		}
	}
	return out
}

func cmdResend(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	seq := fs.Uint64("seq", 0, "the stream sequence of the message to send again")
	id, err := s.parseID(fs, args)
	if err != nil {
		return err
	}
	if *seq == 0 {
		return usagef("--seq is required")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	data, err := c.call(ctx, "POST", registrationPath(id)+"/resend", map[string]uint64{"seq": *seq}, nil)
	if err != nil {
		return err
	}
	if cf.json {
		_, err := s.out.Write(data)
		return err
	}
	var list admin.AttemptList
	if err := decodeAnswer(data, &list); err != nil {
		return err
	}
	if list.Attempts == nil { // one POST: the answer is the attempt itself
		var one attempt.Attempt
		if err := decodeAnswer(data, &one); err != nil {
			return err
		}
		list.Attempts = []attempt.Attempt{one}
	}
	return printAttempts(s.out, list.Attempts)
}

// printAttempts prints a table of attempts, newest first as answered.
func printAttempts(w io.Writer, list []attempt.Attempt) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no attempts")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "AT\tREGISTRATION\tSEQ\tINDEX\tATTEMPT\tTRIGGER\tOUTCOME\tSTATUS\tMS\tERROR")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\n", a.At.Format(time.RFC3339Nano), a.Registration,
			a.Seq, a.Index, a.Attempt, a.Trigger, a.Outcome, a.Status, a.DurationMs, clip(oneLine(a.Error), maxLastErrorWidth))
	}
	return tw.Flush()
}
