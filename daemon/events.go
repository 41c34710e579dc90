package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
)

// openEvents starts the publisher of the operational events. Each shows a
// registration as the admin API answers it, through viewer.
func openEvents(c *Config, nc *nats.Conn, store cursor.Store, viewer *admin.Viewer, log *slog.Logger) (*events.Publisher, error) {
	p, err := events.New(nc, events.Config{
		Prefix: c.EventsPrefix,
		Source: "/jetstream-bridge/" + c.instanceName(),
		Stream: c.Stream,
		Store:  store,
		View:   func(r cursor.Registration) any { return viewer.View(r) },
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("operational events are published on NATS", "subjects", c.EventsPrefix+".>", "failingAfter", c.FailingAfter)
	return p, nil
}

// closeEvents publishes what is queued before the connection closes.
func closeEvents(p *events.Publisher) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.Close(ctx)
}
