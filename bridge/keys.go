package bridge

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
)

// keyOf says which messages of a registration stay in order with each
// other (CONTRACT §12): two records with the same key are POSTed in stream
// order, each only after the one before it was acknowledged.
type keyOf func(rec *projection.Record) string

// orderKey compiles o's key. unordered reports the "none" key, where no
// message waits for another. The admin API validated the key; a form this
// engine does not know is an error, never a guess at a weaker order.
func orderKey(o *cursor.Ordering) (k keyOf, unordered bool, err error) {
	key := cursor.OrderRegistration
	if o != nil && o.Key != "" {
		key = o.Key
	}
	switch {
	case key == cursor.OrderRegistration:
		return func(*projection.Record) string { return "" }, false, nil
	case key == cursor.OrderSubject:
		return func(rec *projection.Record) string { return rec.Subject }, false, nil
	case key == cursor.OrderNone:
		return func(*projection.Record) string { return "" }, true, nil
	case strings.HasPrefix(key, "header:"):
		return headerKey(strings.TrimPrefix(key, "header:")), false, nil
	case strings.HasPrefix(key, "tokens:"):
		idx, err := tokenIndexes(strings.TrimPrefix(key, "tokens:"))
		if err != nil {
			return nil, false, fmt.Errorf("ordering key %q: %w", key, err)
		}
		return tokensKey(idx), false, nil
	}
	return nil, false, fmt.Errorf("ordering key %q is not one of registration, subject, tokens:N, header:<Name> or none", key)
}

// headerKey keys a record by the values of one NATS header, matched
// case-insensitively as HTTP and nats.go match header names; a record
// without it shares the empty value.
func headerKey(name string) keyOf {
	return func(rec *projection.Record) string {
		if v, ok := rec.Header[name]; ok {
			return strings.Join(v, "\x00")
		}
		for k, v := range rec.Header {
			if strings.EqualFold(k, name) {
				return strings.Join(v, "\x00")
			}
		}
		return ""
	}
}

// tokensKey keys a record by some of its subject's tokens (1-based). A
// subject shorter than a token index has an empty token there.
func tokensKey(idx []int) keyOf {
	return func(rec *projection.Record) string {
		var b strings.Builder
		for n, i := range idx {
			if n > 0 {
				b.WriteByte(0)
			}
			b.WriteString(token(rec.Subject, i))
		}
		return b.String()
	}
}

// token is the i-th (1-based) dot-separated token of subject, or "".
func token(subject string, i int) string {
	for ; i > 1; i-- {
		dot := strings.IndexByte(subject, '.')
		if dot < 0 {
			return ""
		}
		subject = subject[dot+1:]
	}
	if dot := strings.IndexByte(subject, '.'); dot >= 0 {
		return subject[:dot]
	}
	return subject
}

func tokenIndexes(list string) ([]int, error) {
	var idx []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("token %q is not a 1-based position", f)
		}
		idx = append(idx, n)
	}
	return idx, nil
}
