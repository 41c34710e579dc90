package daemon

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetstream-bridge/bridge/cursor"
)

// ServiceName is the name every bridge registers with the NATS services
// framework (ADR-32), so `nats micro ls` lists them under one name.
const ServiceName = "jetstream-bridge"

// statusWait bounds the store's answer to one status request: a request
// that outlives it is answered with an error rather than left to the
// caller's timeout.
const statusWait = 2 * time.Second

// Status is the answer of the service's status endpoint, on subject
// bridge.status.<instance>. Registrations and Parked count the whole
// store, as the admin API lists it through any bridge; Leases are the
// shards this bridge holds (0 with the bolt store, which has none).
type Status struct {
	Instance      string `json:"instance"`
	Version       string `json:"version"`
	Store         string `json:"store"`
	Registrations int    `json:"registrations"`
	Parked        int    `json:"parked"`
	Leases        int    `json:"leases"`
}

// StatusSubject is the subject of the status endpoint of the bridge named
// instance.
func StatusSubject(instance string) string { return "bridge.status." + instance }

// statusSource is what the status endpoint reads: the counts the store
// keeps beside its rows (a few keys in bbolt, the kv store's in-memory
// index), so a request costs no walk of the registrations.
type statusSource struct {
	counts func(context.Context) (map[string]map[cursor.State]int, error)
	leases func() int
}

// startService registers the bridge with the NATS services framework on
// nc: `nats micro ping|info|stats` find it, and its status endpoint
// answers Status. The returned stop removes every subscription the
// service made, so a host's connection is left as it was given.
func startService(c *Config, nc *nats.Conn, src statusSource, log *slog.Logger) (stop func(), err error) {
	instance := c.instanceName()
	base := Status{Instance: instance, Version: c.Version, Store: c.Store}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     serviceVersion(c.Version),
		Description: "JetStream stream to webhooks",
		Metadata:    map[string]string{"instance": instance, "version": c.Version, "store": c.Store, "stream": c.Stream},
	})
	if err != nil {
		return nil, err
	}
	err = svc.AddEndpoint("status", micro.HandlerFunc(func(req micro.Request) {
		st, err := src.status(base)
		if err != nil {
			log.Warn("the status endpoint could not read the store's counts", "error", err)
			_ = req.Error("500", "reading the store's counts: "+err.Error(), nil)
			return
		}
		_ = req.RespondJSON(st)
	}), micro.WithEndpointSubject(StatusSubject(instance)))
	if err != nil {
		_ = svc.Stop()
		return nil, err
	}
	log.Info("registered with the NATS services framework", "service", ServiceName, "id", svc.Info().ID,
		"status", StatusSubject(instance))
	return func() {
		if err := svc.Stop(); err != nil {
			log.Warn("stopping the NATS service", "error", err)
		}
	}, nil
}

// status fills in base's counts.
func (s statusSource) status(base Status) (Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusWait)
	defer cancel()
	counts, err := s.counts(ctx)
	if err != nil {
		return Status{}, err
	}
	for _, states := range counts {
		for state, n := range states {
			base.Registrations += n
			if state == cursor.Parked {
				base.Parked += n
			}
		}
	}
	if s.leases != nil {
		base.Leases = s.leases()
	}
	return base, nil
}

// semVer is the form micro requires of a service's version (SemVer 2.0).
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// notIdent is what a SemVer identifier cannot hold.
var notIdent = regexp.MustCompile(`[^0-9A-Za-z-]+`)

// serviceVersion is the bridge's version as micro takes it: a release
// tag without its "v", and any other build ("dev", a commit, a dirty
// tree) as build metadata of 0.0.0, so a build micro would refuse still
// registers; the service's metadata keeps the version as the bridge
// reports it.
func serviceVersion(v string) string {
	if s := strings.TrimPrefix(v, "v"); semVer.MatchString(s) {
		return s
	}
	if meta := strings.Trim(notIdent.ReplaceAllString(v, "-"), "-"); meta != "" {
		return "0.0.0+" + meta
	}
	return "0.0.0"
}
