package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// WindowSize bounds how far past NextSeq a registration with ordering keys
// may run (CONTRACT §12): a key that keeps failing holds the registration
// once its window is full, so what is remembered ahead of the cursor, in
// memory and in every stored row, stays bounded.
const WindowSize = 4096

// Ordering keys with a fixed meaning (CONTRACT §12); "tokens:N[,M…]" and
// "header:<Name>" are the parameterised forms.
const (
	OrderRegistration = "registration"
	OrderSubject      = "subject"
	OrderNone         = "none"
)

// DefaultOrderMaxInFlight is a keyed registration's POSTs at once when its
// ordering does not say.
const DefaultOrderMaxInFlight = 16

// Ordering says which messages of a registration stay in order with each
// other, and how many POSTs of it may be in flight at once.
type Ordering struct {
	Key         string `json:"key"`
	MaxInFlight int    `json:"maxInFlight,omitempty"`
}

// Keyed reports whether c is delivered with more than one POST at a time:
// an ordering whose key is not the whole registration.
func (c *Config) Keyed() bool {
	return c.Ordering != nil && c.Ordering.Key != "" && c.Ordering.Key != OrderRegistration
}

// Ahead is the set of sequences past a registration's NextSeq that its
// receiver already acknowledged, ascending and distinct.
//
// Invariant: every member is at or above NextSeq and below
// NextSeq+WindowSize. NextSeq itself is a member only until the engine
// reads past it: a cursor that stopped where the acknowledged set goes on
// (a restart, a takeover) stands on a message acknowledged already, and
// dropping it there would POST it again. It only ever holds acknowledged
// sequences, so losing it repeats POSTs and never skips a message; a
// member that was not acknowledged would skip one, which is why nothing
// but the delivery engine adds to it.
type Ahead []uint64

// Trim returns a without the members below next, the cursor it now
// stands on.
func (a Ahead) Trim(next uint64) Ahead {
	i, _ := slices.BinarySearch(a, next)
	if i == 0 {
		return a
	}
	if i == len(a) {
		return nil
	}
	return slices.Clone(a[i:])
}

// ErrInvalidWindow is a windowed Progress whose Ahead breaks the
// invariant: Advance refuses it, since a store would keep a set it cannot
// write, or not read back once written.
var ErrInvalidWindow = errors.New("cursor: the acknowledged-ahead set breaks its invariant")

// Check reports whether a keeps the invariant for the cursor next:
// ascending, distinct, every member at or above next and below
// next+WindowSize. The error wraps ErrInvalidWindow.
func (a Ahead) Check(next uint64) error {
	for i, s := range a {
		switch {
		case s < next:
			return fmt.Errorf("%w: %d is behind the cursor %d", ErrInvalidWindow, s, next)
		case s-next >= WindowSize:
			return fmt.Errorf("%w: %d is %d or more past the cursor %d", ErrInvalidWindow, s, WindowSize, next)
		case i > 0 && s <= a[i-1]:
			return fmt.Errorf("%w: %d follows %d", ErrInvalidWindow, s, a[i-1])
		}
	}
	return nil
}

// CheckWindow refuses a windowed p whose Ahead breaks the invariant for
// its NextSeq (see Ahead.Check); progress without a window passes. Every
// Store's Advance calls it, so no store keeps a set it cannot write or
// read back.
func CheckWindow(p Progress) error {
	if !p.Window {
		return nil
	}
	return p.Ahead.Check(p.NextSeq)
}

// Contains reports whether seq was acknowledged ahead of the cursor.
func (a Ahead) Contains(seq uint64) bool {
	_, ok := slices.BinarySearch(a, seq)
	return ok
}

// The stored form is the first member and a bitmap of the members from it:
//
//	uvarint first | bitmap, bit i of byte i/8 set for member first+i
//
// so a full window costs 512 bytes, not 4,096 numbers, in every write of
// its row.

// appendAhead appends the stored form of a (nothing when a is empty).
func appendAhead(b []byte, a Ahead) []byte {
	if len(a) == 0 {
		return b
	}
	first := a[0]
	b = binary.AppendUvarint(b, first)
	bits := make([]byte, (a[len(a)-1]-first)/8+1)
	for _, s := range a {
		d := s - first
		bits[d/8] |= 1 << (d % 8)
	}
	return append(b, bits...)
}

// errAheadTooWide refuses a stored set wider than any window: reading it
// would allocate what a damaged row says.
var errAheadTooWide = fmt.Errorf("acknowledged-ahead set is wider than the %d-sequence window", WindowSize)

// readAhead decodes the stored form appendAhead wrote.
func readAhead(b []byte) (Ahead, error) {
	if len(b) == 0 {
		return nil, nil
	}
	first, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errShort
	}
	bits := b[n:]
	if len(bits) > WindowSize/8 {
		return nil, errAheadTooWide
	}
	var a Ahead
	for i, by := range bits {
		for j := range 8 {
			if by&(1<<j) == 0 {
				continue
			}
			d := uint64(i*8 + j)
			if d > math.MaxUint64-first {
				return nil, errors.New("acknowledged-ahead set runs past the last sequence")
			}
			a = append(a, first+d)
		}
	}
	if len(a) == 0 || a[0] != first {
		return nil, errors.New("acknowledged-ahead set does not start at its first member")
	}
	return a, nil
}

// MarshalJSON stores a as its compact form in base64, for stores that keep
// rows as JSON.
func (a Ahead) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.StdEncoding.EncodeToString(appendAhead(nil, a)))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (a *Ahead) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("acknowledged-ahead set: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("acknowledged-ahead set: %w", err)
	}
	out, err := readAhead(raw)
	if err != nil {
		return err
	}
	*a = out
	return nil
}
