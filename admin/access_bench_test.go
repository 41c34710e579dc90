package admin

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
// operator token among 1,000 stored, alternated in rounds of 256 creates
// on one store, so that both meet the same file and the same load of a
// shared machine. ratio is the operator's rate over the root token's:
// what the scope check costs a create.
func BenchmarkCreateParallel16Scoped(b *testing.B) {
	h, store := benchAPI(b)
	operator := seedTokens(b, store, 1000)
	const round = 256
	var spent [2]time.Duration
	var made [2]int
	var next atomic.Int64
	b.ResetTimer()
	for done, who := 0, 0; done < b.N; done, who = done+round, 1-who {
		token := []string{testToken, operator}[who]
		n := min(round, b.N-done)
		start := time.Now()
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(n))
		for range 16 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					body := fmt.Sprintf(`{"id":"team-500-r%d","namespace":"outbox","subject":"journal.orders.>","url":"https://a.example/"}`, next.Add(1))
					req := httptest.NewRequest("POST", "/v1/registrations", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+token)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusCreated {
						b.Errorf("create: %d %s", rec.Code, rec.Body)
						return
					}
				}
			})
		}
		wg.Wait()
		spent[who] += time.Since(start)
		made[who] += n
	}
	if spent[0] > 0 && spent[1] > 0 {
		root, op := float64(made[0])/spent[0].Seconds(), float64(made[1])/spent[1].Seconds()
		b.ReportMetric(root, "root-creates/s")
		b.ReportMetric(op, "operator-creates/s")
		b.ReportMetric(op/root, "ratio")
	}
}
