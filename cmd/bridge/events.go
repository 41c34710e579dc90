package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/events"
)

// eventFlags configure the operational events of `bridge run`.
type eventFlags struct {
	prefix       string
	failingAfter int
}

func (e *eventFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.prefix, "events-prefix", events.DefaultPrefix, "subject prefix of the operational events (under the journal's subjects, a registration can deliver them)")
	fs.IntVar(&e.failingAfter, "failing-after", events.DefaultFailingAfter, "consecutive failures at which registration.failing is published (0 = neither failing nor recovered)")
}

func (e *eventFlags) validate() error {
	switch {
	case !validPrefix(e.prefix):
		return fmt.Errorf("--events-prefix %q is not a subject prefix: dot-separated tokens without spaces or wildcards", e.prefix)
	case e.prefix == attempt.SubjectRoot || strings.HasPrefix(e.prefix, attempt.SubjectRoot+"."):
		return fmt.Errorf("--events-prefix %q lies under the attempt log's subjects (%s.>)", e.prefix, attempt.SubjectRoot)
	case e.failingAfter < 0:
		return fmt.Errorf("--failing-after must be 0 (off) or more, got %d", e.failingAfter)
	}
	return nil
}

func validPrefix(p string) bool {
	if p == "" || strings.ContainsAny(p, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(p, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// openEvents starts the publisher of the operational events. Each shows a
// registration as the admin API answers it, through viewer.
func openEvents(c *runConfig, nc *nats.Conn, store cursor.Store, viewer *admin.Viewer, log *slog.Logger) (*events.Publisher, error) {
	p, err := events.New(nc, events.Config{
		Prefix: c.events.prefix,
		Source: "/jetstream-bridge/" + c.instanceName(),
		Stream: c.stream,
		Store:  store,
		View:   func(r cursor.Registration) any { return viewer.View(r) },
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("operational events are published on NATS", "subjects", c.events.prefix+".>", "failingAfter", c.events.failingAfter)
	return p, nil
}

// instanceName names this bridge in its events: --instance with the kv
// store, else the host.
func (c *runConfig) instanceName() string {
	if c.store.instance != "" {
		return c.store.instance
	}
	return hostLabel()
}

// closeEvents publishes what is queued before the connection closes.
func closeEvents(p *events.Publisher) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.Close(ctx)
}

func eventOptions(c *runConfig, p *events.Publisher) bridge.DaemonOption {
	return bridge.WithEvents(p, c.events.failingAfter)
}
