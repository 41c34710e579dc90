package webhook

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testSecret returns a valid "whsec_" secret whose key is n bytes of seed.
func testSecret(seed byte, n int) string {
	key := make([]byte, n)
	for i := range key {
		key[i] = seed + byte(i)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

func TestParseSecret(t *testing.T) {
	for _, n := range []int{24, 32, 64} {
		key, err := ParseSecret(testSecret(7, n))
		if err != nil || len(key) != n || key[0] != 7 {
			t.Errorf("ParseSecret(%d-byte key) = %d bytes, %v", n, len(key), err)
		}
	}
	short := testSecret(1, 23)
	long := testSecret(1, 65)
	for secret, want := range map[string]string{
		"":                                 `secret must start with "whsec_"`,
		"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0": `secret must start with "whsec_"`,
		"whsec_not*base64!":                `secret is not standard base64 after "whsec_"`,
		"whsec_" + strings.Repeat("A", 31): `secret is not standard base64 after "whsec_"`,
		short:                              "secret decodes to 23 bytes; want 24 to 64",
		long:                               "secret decodes to 65 bytes; want 24 to 64",
	} {
		_, err := ParseSecret(secret)
		if err == nil || err.Error() != want {
			t.Errorf("ParseSecret(%q) = %v, want %q", secret, err, want)
			continue
		}
		if b64 := strings.TrimPrefix(secret, SecretPrefix); len(b64) > 4 && strings.Contains(err.Error(), b64) {
			t.Errorf("error %q repeats the secret", err)
		}
	}
}

// The signature is checked by the independent Standard Webhooks library,
// so the two implementations cannot share a misreading of the spec.
func TestSignVerifiesWithStandardWebhooks(t *testing.T) {
	secret := testSecret(42, 32)
	key, _ := ParseSecret(secret)
	id, ts := "JOURNAL-7", time.Now().Unix()
	body := []byte(`{"hello":"world"}` + "\n\x00binary")

	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(key, id, ts, body))
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("standard-webhooks rejects our signature: %v", err)
	}
	theirs, _ := wh.Sign(id, time.Unix(ts, 0), body)
	if theirs != Sign(key, id, ts, body) {
		t.Errorf("Sign = %q, standard-webhooks signs %q", Sign(key, id, ts, body), theirs)
	}
	if err := wh.Verify(append(body, '!'), h); err == nil {
		t.Error("a changed body still verifies")
	}
}

func TestParseSignatureHeader(t *testing.T) {
	key, _ := ParseSecret(testSecret(3, 32))
	v1 := Sign(key, "id", 1, nil)
	sigs, err := ParseSignatureHeader("  " + v1 + "  v1a,AAAA " + v1 + " ")
	if err != nil || len(sigs) != 3 || sigs[0].Version != "v1" || len(sigs[0].MAC) != 32 || sigs[1].Version != "v1a" || sigs[1].MAC != nil {
		t.Fatalf("ParseSignatureHeader = %+v, %v", sigs, err)
	}
	for h, want := range map[string]string{
		"":                "signature header is empty",
		"   ":             "signature header is empty",
		"v1":              "signature 1 is not version,signature",
		v1 + " ,abc":      "signature 2 is not version,signature",
		v1 + " v1,":       "signature 2 is not version,signature",
		"v1,not-base64!!": "signature 1 is not a base64 HMAC-SHA256",
		"v1,AAAA":         "signature 1 is not a base64 HMAC-SHA256",
	} {
		if _, err := ParseSignatureHeader(h); err == nil || err.Error() != want {
			t.Errorf("ParseSignatureHeader(%q) = %v, want %q", h, err, want)
		}
	}
}

func TestVerify(t *testing.T) {
	cur, _ := ParseSecret(testSecret(1, 32))
	prev, _ := ParseSecret(testSecret(2, 32))
	other, _ := ParseSecret(testSecret(3, 32))
	body := []byte("payload")
	header := Sign(cur, "m1", 100, body) + " " + Sign(prev, "m1", 100, body)

	for name, keys := range map[string][][]byte{"current": {cur}, "previous": {prev}, "both": {other, prev}} {
		if err := Verify(keys, "m1", 100, body, header); err != nil {
			t.Errorf("%s key: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		id   string
		ts   int64
		body string
	}{"id": {"m2", 100, "payload"}, "timestamp": {"m1", 101, "payload"}, "body": {"m1", 100, "payloaD"}} {
		if err := Verify([][]byte{cur, prev}, tc.id, tc.ts, []byte(tc.body), header); !errors.Is(err, ErrNoMatchingSignature) {
			t.Errorf("changed %s: err = %v, want ErrNoMatchingSignature", name, err)
		}
	}
	if err := Verify([][]byte{other}, "m1", 100, body, header); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("foreign key: err = %v", err)
	}
	if err := Verify(nil, "m1", 100, body, header); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("no keys: err = %v", err)
	}
}

func TestVerifyRequest(t *testing.T) {
	key, _ := ParseSecret(testSecret(9, 32))
	now := time.Unix(1_700_000_000, 0)
	body := []byte("b")
	req := func(ts int64) http.Header {
		h := http.Header{}
		h.Set(HeaderID, "m")
		h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderSignature, Sign(key, "m", ts, body))
		return h
	}
	if err := VerifyRequest([][]byte{key}, req(now.Unix()-60), body, now, 5*time.Minute); err != nil {
		t.Errorf("fresh request: %v", err)
	}
	for name, h := range map[string]http.Header{
		"old":     req(now.Unix() - 301),
		"future":  req(now.Unix() + 301),
		"missing": {},
	} {
		if err := VerifyRequest([][]byte{key}, h, body, now, 5*time.Minute); err == nil {
			t.Errorf("%s request verified", name)
		}
	}
	h := req(now.Unix())
	h.Set(HeaderTimestamp, "soon")
	if err := VerifyRequest([][]byte{key}, h, body, now, time.Minute); err == nil || !strings.Contains(err.Error(), "not unix seconds") {
		t.Errorf("bad timestamp: %v", err)
	}
}

func TestValidAuthScheme(t *testing.T) {
	for _, s := range []string{"Bearer", "Basic", "token", "AWS4-HMAC-SHA256", "x!#$%&'*+-.^_`|~9"} {
		if !ValidAuthScheme(s) {
			t.Errorf("ValidAuthScheme(%q) = false", s)
		}
	}
	for _, s := range []string{"", "Bea rer", "Bearer\r\nX-Evil: 1", "Bearer:", "a,b", "(x)", "é", "a\tb", "\"q\""} {
		if ValidAuthScheme(s) {
			t.Errorf("ValidAuthScheme(%q) = true", s)
		}
	}
}

// FuzzParseSignatureHeader: no panic, and what parses is what Verify reads.
func FuzzParseSignatureHeader(f *testing.F) {
	key, _ := ParseSecret(testSecret(5, 32))
	good := Sign(key, "id", 1, []byte("x"))
	for _, s := range []string{good, good + " " + good, "v1a,AAAA " + good, "", "v1", "v1,", ",", "v1,====", "  v1,x  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sigs, err := ParseSignatureHeader(h)
		if err != nil {
			if err.Error() == "" || sigs != nil {
				t.Fatalf("error %q with signatures %v", err, sigs)
			}
			return
		}
		if len(sigs) == 0 {
			t.Fatal("no error and no signatures")
		}
		for _, s := range sigs {
			if s.Version == "" || (s.Version == "v1") != (s.MAC != nil) || (s.MAC != nil && len(s.MAC) != 32) {
				t.Fatalf("malformed signature %+v from %q", s, h)
			}
		}
		_ = Verify([][]byte{key}, "id", 1, []byte("x"), h)
	})
}
