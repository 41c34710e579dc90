package admin

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// seedTokens stores n scoped tokens (team-0 … team-n-1, operators of
// their own prefix) and returns the secret of the one in the middle.
func seedTokens(b *testing.B, store cursor.Tokens, n int) string {
	b.Helper()
	var mid string
	for i := range n {
		secret := fmt.Sprintf("bst_bench-token-%04d-%s", i, strings.Repeat("x", 32))
		sum := sha256.Sum256([]byte(secret))
		t := cursor.Token{Name: fmt.Sprintf("team-%d", i), IDPrefix: fmt.Sprintf("team-%d-", i), Role: cursor.Operator,
			CreatedAt: time.Now(), Hash: sum[:]}
		if err := store.CreateToken(b.Context(), t); err != nil {
			b.Fatal(err)
		}
		if i == n/2 {
			mid = secret
		}
	}
	return mid
}

// BenchmarkAuthenticate is what finding the caller of a request costs
// with 1,000 scoped tokens stored: a SHA-256, a map lookup and a
// constant-time compare, for a scoped token, the root token and a token
// that is not valid.
func BenchmarkAuthenticate(b *testing.B) {
	_, store := benchAPI(b)
	scoped := seedTokens(b, store, 1000)
	s := &server{tokens: store, tokenSum: sha256.Sum256([]byte(testToken)), hasToken: true, now: time.Now}
	for _, c := range []struct{ name, token string }{{"scoped", scoped}, {"root", testToken}, {"invalid", "bst_nobody"}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/v1/registrations", nil)
			req.Header.Set("Authorization", "Bearer "+c.token)
			for b.Loop() {
				_, err := s.authenticate(req)
				if (err == nil) != (c.name != "invalid") {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreateParallel16Scoped is BenchmarkCreateParallel16 (R1's
// shape: 16 clients creating at once) with the root token and with an
// operator token, each on a store of its own holding 1,000 tokens, the
// same ids created: the ratio of the two is what the scope check costs a
// create.
func BenchmarkCreateParallel16Scoped(b *testing.B) {
	for _, who := range []string{"root", "operator"} {
		b.Run(who, func(b *testing.B) {
			h, store := benchAPI(b)
			token, prefix := seedTokens(b, store, 1000), "team-500-"
			if who == "root" {
				token = testToken
			}
			runClients(b, 16, func(i int64) error {
				body := fmt.Sprintf(`{"id":"%sr%d","namespace":"outbox","subject":"journal.orders.>","url":"https://a.example/"}`, prefix, i)
				req := httptest.NewRequest("POST", "/v1/registrations", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					return fmt.Errorf("create %d: %d %s", i, rec.Code, rec.Body)
				}
				return nil
			})
		})
	}
}
