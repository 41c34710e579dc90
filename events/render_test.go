package events

import (
	"log/slog"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// BenchmarkRender is what one registration event costs to render: a
// created event, as every create through the admin API publishes one.
func BenchmarkRender(b *testing.B) {
	p := &Publisher{cfg: Config{Prefix: DefaultPrefix, Source: "/jetstream-bridge/b1", Stream: "JOURNAL", Logger: slog.New(slog.DiscardHandler),
		View: func(r cursor.Registration) any { return struct{ ID, URL string }{r.ID, r.URL} }}}
	row := cursor.Registration{Config: cursor.Config{ID: "billing-0001", URL: "https://example.com/hooks/billing"}}
	e := Event{Kind: Created, At: time.Now(), Registration: row.ID, Row: &row}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.render(e); err != nil {
			b.Fatal(err)
		}
	}
}
