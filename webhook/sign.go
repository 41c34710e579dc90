package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// Key sizes a secret must decode to. Below 24 bytes an HMAC key is weak;
// above 64 it exceeds SHA-256's block and is hashed down anyway.
const (
	MinKeyBytes = 24
	MaxKeyBytes = 64
)

// ErrNoMatchingSignature means no signature in the header was made with
// any of the keys over this id, timestamp and body.
var ErrNoMatchingSignature = errors.New("no signature matches the message")

// ParseSecret decodes a "whsec_<base64>" secret to its HMAC key. Its errors
// say what is wrong with the secret and never repeat it.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("secret must start with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("secret is not standard base64 after %q", SecretPrefix)
	}
	if len(key) < MinKeyBytes || len(key) > MaxKeyBytes {
		return nil, fmt.Errorf("secret decodes to %d bytes; want %d to %d", len(key), MinKeyBytes, MaxKeyBytes)
	}
	return key, nil
}

// Sign returns the Standard Webhooks v1 signature "v1,<base64 HMAC-SHA256>"
// over id "." ts "." body. body must be the exact bytes sent: a receiver
// verifies what it read, not a re-encoding of it.
func Sign(key []byte, id string, ts int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts, body))
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	var buf [20]byte
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(buf[:0], ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Signature is one entry of a webhook-signature header.
type Signature struct {
	// Version is the scheme, "v1" for HMAC-SHA256. Other versions (such as
	// the asymmetric "v1a") are kept but never match a key.
	Version string
	// MAC is the decoded v1 signature; nil for other versions.
	MAC []byte
}

// ParseSignatureHeader splits a webhook-signature header into its
// space-separated "version,base64" entries. An empty header, an entry
// without a comma or a v1 entry that is not a base64 SHA-256 MAC is an
// error naming the entry's position.
func ParseSignatureHeader(h string) ([]Signature, error) {
	fields := strings.Fields(h)
	if len(fields) == 0 {
		return nil, errors.New("signature header is empty")
	}
	sigs := make([]Signature, 0, len(fields))
	for i, f := range fields {
		version, value, ok := strings.Cut(f, ",")
		if !ok || version == "" || value == "" {
			return nil, fmt.Errorf("signature %d is not version,signature", i+1)
		}
		s := Signature{Version: version}
		if version == "v1" {
			m, err := base64.StdEncoding.DecodeString(value)
			if err != nil || len(m) != sha256.Size {
				return nil, fmt.Errorf("signature %d is not a base64 HMAC-SHA256", i+1)
			}
			s.MAC = m
		}
		sigs = append(sigs, s)
	}
	return sigs, nil
}

// Verify checks that some v1 signature in header was made with one of keys
// over id, ts and body, in constant time per comparison. It does not judge
// the timestamp's age; VerifyRequest does.
func Verify(keys [][]byte, id string, ts int64, body []byte, header string) error {
	sigs, err := ParseSignatureHeader(header)
	if err != nil {
		return err
	}
	for _, k := range keys {
		want := mac(k, id, ts, body)
		for _, s := range sigs {
			if s.Version == "v1" && hmac.Equal(s.MAC, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// VerifyRequest verifies a received request's Standard Webhooks headers
// and refuses a timestamp further than tolerance from now, so a captured
// request cannot be replayed later.
func VerifyRequest(keys [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsText, sig := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sig == "" {
		return fmt.Errorf("missing %s, %s or %s header", HeaderID, HeaderTimestamp, HeaderSignature)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not unix seconds", HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%s is %s away from now; tolerance is %s", HeaderTimestamp, d.Round(time.Second), tolerance)
	}
	return Verify(keys, id, ts, body, sig)
}

// ValidAuthScheme reports whether s is an HTTP authentication scheme: a
// non-empty RFC 9110 token. Anything else would let a scheme smuggle a
// space or a header break into the Authorization line.
func ValidAuthScheme(s string) bool { return isToken(s) }

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validHeaderValue reports whether v can travel in a header field: no
// control characters other than horizontal tab (RFC 9110, 5.5).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
