package bridge_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// BenchmarkDrainAttemptLog is BenchmarkDrain with the attempt log off and
// on: what recording every POST costs the delivery path.
func BenchmarkDrainAttemptLog(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			var opts []bridge.Option
			if on {
				opts = append(opts, bridge.WithRecorder(e.attemptLog(2*time.Second)))
			}
			sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusNoContent)
			}))
			defer sink.Close()
			payload := strings.Repeat("x", 1024)
			for range b.N {
				e.publish("journal.bench", payload)
			}
			e.register("r", sink.URL, "journal.>")
			w := e.workerFor(cloudevents.New(cloudevents.WithStream(stream)), opts...)
			b.ResetTimer()
			ctx := context.Background()
			for delivered := 0; delivered < b.N; {
				rep, err := w.Sweep(ctx, time.Now(), 16)
				if err != nil {
					b.Fatal(err)
				}
				delivered += rep.Deliveries
				if err := e.db.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				w.Wake("r")
			}
		})
	}
}
