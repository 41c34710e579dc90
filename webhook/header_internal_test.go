package webhook

import (
	"net/textproto"
	"testing"
)

// The sender writes its headers into the map directly; a key that is not
// canonical would be sent beside, not instead of, a projection's header.
func TestSenderHeaderKeysAreCanonical(t *testing.T) {
	for _, k := range []string{canonicalUserAgent, canonicalID, canonicalTimestamp,
		canonicalSignature, canonicalAuth, canonicalToken, canonicalXToken} {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("header key %q is sent as written but canonical is %q", k, c)
		}
	}
	for k, c := range map[string]string{HeaderID: canonicalID, HeaderTimestamp: canonicalTimestamp, HeaderSignature: canonicalSignature} {
		if textproto.CanonicalMIMEHeaderKey(k) != c {
			t.Errorf("%q and %q name different headers", k, c)
		}
	}
}
