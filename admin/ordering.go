package admin

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/jetstream-bridge/bridge/cursor"
)

// maxOrderInFlight bounds a registration's POSTs at once (CONTRACT §12):
// beyond it one registration would hold a whole bridge's share.
const maxOrderInFlight = 256

// The parameterised forms of an ordering key (CONTRACT §12).
const (
	orderTokensPrefix = "tokens:"
	orderHeaderPrefix = "header:"
)

// orderKeyForms names every form of a key, for the message that refuses
// one.
const orderKeyForms = "registration, subject, tokens:N[,M…], header:<Name> or none"

// orderingRequest uses a pointer so an explicit zero is refused and an
// absent maxInFlight takes the default.
type orderingRequest struct {
	Key         string `json:"key"`
	MaxInFlight *int   `json:"maxInFlight"`
}

// Ordering is a registration's ordering as answers show it: the key as
// registered and its POSTs at once, the default filled in.
type Ordering struct {
	Key         string `json:"key"`
	MaxInFlight int    `json:"maxInFlight"`
}

// InFlight tells how many POSTs of a registration are in flight now
// (bridge.Daemon is one).
type InFlight interface {
	InFlight(id string) int
}

// validOrdering checks an outbox registration's ordering into c: the key
// as given (so `registration` is echoed when the caller wrote it) and
// maxInFlight filled in. It refuses ordering beside batch, whose POST is
// a run of messages in stream order.
func validOrdering(c *cursor.Config, r *orderingRequest) error {
	if r == nil {
		return nil
	}
	if err := validOrderKey(r.Key); err != nil {
		return err
	}
	n := cursor.DefaultOrderMaxInFlight
	if r.MaxInFlight != nil {
		if n = *r.MaxInFlight; n < 1 || n > maxOrderInFlight {
			return invalid("ordering.maxInFlight must be 1 to %d, not %d", maxOrderInFlight, n)
		}
	}
	if c.Batch != nil {
		return invalid("ordering and batch cannot be combined: a batch is one POST of messages in stream order")
	}
	c.Ordering = &cursor.Ordering{Key: r.Key, MaxInFlight: n}
	return nil
}

// validOrderKey accepts the key forms of CONTRACT §12. A tokens list is
// written canonically (decimal, no sign or leading zero, no spaces), so
// what is echoed is what the delivery reads.
func validOrderKey(key string) error {
	switch key {
	case "":
		return invalid("ordering.key is required: %s", orderKeyForms)
	case cursor.OrderRegistration, cursor.OrderSubject, cursor.OrderNone:
		return nil
	}
	if list, ok := strings.CutPrefix(key, orderTokensPrefix); ok {
		return validTokenList(key, list)
	}
	if name, ok := strings.CutPrefix(key, orderHeaderPrefix); ok {
		if !isHTTPToken(name) {
			return invalid("ordering.key %q must name a header after %q: letters, digits and !#$%%&'*+.^_`|~-", truncate(key, maxIDLen), orderHeaderPrefix)
		}
		return nil
	}
	return invalid("ordering.key %q is not a key: %s", truncate(key, maxIDLen), orderKeyForms)
}

// validTokenList accepts "N" or "N,M,…": distinct 1-based subject token
// positions.
func validTokenList(key, list string) error {
	seen := map[int]bool{}
	for tok := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(tok)
		switch {
		case tok == "0":
			return invalid("ordering.key %q: tokens are numbered from 1", truncate(key, maxIDLen))
		case err != nil || tok[0] < '1' || tok[0] > '9':
			return invalid("ordering.key %q must be tokens: and a comma-separated list of token positions, e.g. tokens:2,4", truncate(key, maxIDLen))
		case seen[n]:
			return invalid("ordering.key %q names token %d twice", truncate(key, maxIDLen), n)
		}
		seen[n] = true
	}
	return nil
}

func orderingView(o *cursor.Ordering) *Ordering {
	if o == nil {
		return nil
	}
	return &Ordering{Key: o.Key, MaxInFlight: cmp.Or(o.MaxInFlight, cursor.DefaultOrderMaxInFlight)}
}
