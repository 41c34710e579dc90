package runflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/jetstream-bridge/bridge/daemon"
	"github.com/jetstream-bridge/bridge/internal/bytesize"
)

// Settings are the flags of `bridge run`: a daemon.Config, and the
// flags whose form differs from their field's.
type Settings struct {
	cfg            daemon.Config
	nats           NATS
	kv             KV
	streamSubjects string
	embeddedRoutes string
	a2aAllowHosts  string
	createStream   optionalBool
	attemptsBytes  bytesize.Size
	heapFloor      bytesize.Size
	logFormat      string
}

// optionalBool is a bool flag that knows whether it was given, for
// defaults that depend on other flags.
type optionalBool struct {
	set, value bool
}

func (b *optionalBool) String() string   { return fmt.Sprint(b.value) }
func (b *optionalBool) IsBoolFlag() bool { return true }
func (b *optionalBool) Set(s string) error {
	v, err := parseBool(s)
	if err != nil {
		return err
	}
	b.set, b.value = true, v
	return nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "t", "true", "yes", "on":
		return true, nil
	case "0", "f", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", s)
}

// Names maps each daemon.Config field to its flag, so the daemon's
// errors, which name fields, name flags here.
func Names() map[string]string {
	return map[string]string{
		"DataDir": "data-dir", "Store": "store", "KVBucket": "kv-bucket", "KVReplicas": "kv-replicas",
		"Instance": "instance", "LeaseTTL": "lease-ttl", "NATSURL": "nats-url",
		"NATSCreds": "nats-creds", "NATSNkey": "nats-nkey", "NATSUser": "nats-user", "NATSPassword": "nats-password",
		"NATSTLSCA": "nats-tls-ca", "NATSTLSCert": "nats-tls-cert", "NATSTLSKey": "nats-tls-key",
		"EmbeddedListen": "embedded-listen", "EmbeddedCluster": "embedded-cluster", "EmbeddedRoutes": "embedded-routes",
		"EmbeddedName": "embedded-name", "Stream": "stream", "StreamSubjects": "stream-subjects",
		"CreateStream": "create-stream", "AttemptLog": "attempt-log", "AttemptsStream": "attempts-stream",
		"AttemptsMaxAge": "attempts-max-age", "AttemptsMaxBytes": "attempts-max-bytes",
		"EventsPrefix": "events-prefix", "FailingAfter": "failing-after", "AdminListen": "admin-listen",
		"AdminTLSCert": "admin-tls-cert", "AdminTLSKey": "admin-tls-key", "AdminToken": "admin-token",
		"A2AAllowHosts": "a2a-allow-hosts", "A2AAllowLoopback": "a2a-allow-loopback",
		"MaxInFlight": "max-in-flight", "MaxAttempts": "max-attempts", "RequestTimeout": "request-timeout",
		"FlushInterval": "flush-interval", "HeapFloor": "heap-floor", "CESource": "ce-source", "CEType": "ce-type",
		"DebugListen": "debug-listen", "NATSService": "nats-service", "Logger": "log-format",
	}
}

func New(stderr io.Writer) (*flag.FlagSet, *Settings) {
	s := &Settings{cfg: daemon.DefaultConfig()}
	c := &s.cfg
	s.attemptsBytes, s.heapFloor = bytesize.Size(c.AttemptsMaxBytes), bytesize.Size(c.HeapFloor)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for bridge.db, the embedded server's JetStream store and the admin token")
	fs.StringVar(&c.Store, "store", c.Store, "bolt (bridge.db in --data-dir) or kv (replicated JetStream key-value buckets, for several bridges)")
	s.kv.Register(fs)
	fs.StringVar(&c.Instance, "instance", "", "this bridge's name among the bridges of --store kv (default host name and a random suffix)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", c.LeaseTTL, "how long this bridge's share of registrations outlives its last contact with NATS (--store kv)")
	fs.StringVar(&c.NATSURL, "nats-url", "", "NATS server to join (also NATS_URL); empty starts an embedded nats-server with JetStream")
	s.nats.Register(fs)
	fs.StringVar(&c.EmbeddedListen, "embedded-listen", c.EmbeddedListen, "client address of the embedded server")
	fs.StringVar(&c.EmbeddedCluster, "embedded-cluster", "", "route listen address HOST:PORT: the embedded server joins a cluster (named \"bridge\") with other bridges' embedded servers")
	fs.StringVar(&s.embeddedRoutes, "embedded-routes", "", "comma-separated nats://HOST:PORT route addresses of the cluster's embedded servers (this one's may be listed too)")
	fs.StringVar(&c.EmbeddedName, "embedded-name", "", "server name of the embedded server, unique in the cluster (default \"bridge-embedded\", or host name and route port with --embedded-cluster)")
	fs.StringVar(&c.Stream, "stream", c.Stream, "the journal stream")
	fs.StringVar(&s.streamSubjects, "stream-subjects", strings.Join(c.StreamSubjects, ","), "subjects (comma-separated) when the bridge creates the stream")
	fs.Var(&s.createStream, "create-stream", "create the stream if missing (default true when embedded, false otherwise)")
	fs.BoolVar(&c.AttemptLog, "attempt-log", c.AttemptLog, "record every POST in the attempts stream")
	fs.StringVar(&c.AttemptsStream, "attempts-stream", c.AttemptsStream, "the attempts stream, created or updated at start")
	fs.DurationVar(&c.AttemptsMaxAge, "attempts-max-age", c.AttemptsMaxAge, "how long the attempts stream keeps a record")
	fs.Var(&s.attemptsBytes, "attempts-max-bytes", "how many bytes the attempts stream keeps (KiB, MiB, GiB suffixes)")
	fs.StringVar(&c.EventsPrefix, "events-prefix", c.EventsPrefix, "subject prefix of the operational events (under the journal's subjects, a registration can deliver them)")
	fs.IntVar(&c.FailingAfter, "failing-after", c.FailingAfter, "consecutive failures at which registration.failing is published (0 = neither failing nor recovered)")
	fs.StringVar(&c.AdminListen, "admin-listen", c.AdminListen, "address of the admin API, /metrics, /healthz and /readyz")
	fs.StringVar(&c.AdminTLSCert, "admin-tls-cert", "", "PEM certificate (chain) file: serve the admin listener over HTTPS, with --admin-tls-key")
	fs.StringVar(&c.AdminTLSKey, "admin-tls-key", "", "PEM private key file of --admin-tls-cert")
	fs.StringVar(&c.AdminToken, "admin-token", "", "bearer token for /v1/*; empty generates one into <data-dir>/admin-token")
	fs.StringVar(&s.a2aAllowHosts, "a2a-allow-hosts", "", "comma-separated exact hosts A2A webhooks may use (empty = any public host)")
	fs.BoolVar(&c.A2AAllowLoopback, "a2a-allow-loopback", false, "let A2A webhooks use http:// on loopback addresses (tests, demos)")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", c.MaxInFlight, "POSTs of the whole bridge at once; a registration without ordering takes one, a keyed one up to its ordering.maxInFlight")
	fs.IntVar(&c.MaxAttempts, "max-attempts", c.MaxAttempts, "consecutive failures before a registration is parked")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", c.RequestTimeout, "timeout of one POST")
	fs.DurationVar(&c.FlushInterval, "flush-interval", c.FlushInterval, "longest an acknowledged cursor waits to be made durable: what a crash can repeat")
	fs.Var(&s.heapFloor, "heap-floor", "heap size below which Go's collector does not run, so a small heap is not collected every few MiB (0 = GOGC alone)")
	fs.StringVar(&c.CESource, "ce-source", "", "CloudEvents source for messages that are not CloudEvents already (default /jetstream/<stream>)")
	fs.StringVar(&c.CEType, "ce-type", c.CEType, "CloudEvents type for messages without a ce-type header")
	fs.StringVar(&s.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&c.NATSService, "nats-service", c.NATSService, "register with the NATS services framework as "+daemon.ServiceName+", found by nats micro ls|info|ping, with a status endpoint on bridge.status.<instance>")
	fs.StringVar(&c.DebugListen, "debug-listen", "", "address for Go's /debug/pprof profiles (empty = off; never expose it publicly)")
	return fs, s
}

// Config is the daemon's configuration of the parsed flags, logging to
// stderr; version is the one the daemon reports.
func (s *Settings) Config(stderr io.Writer, version string) (daemon.Config, error) {
	c := s.cfg
	if c.NATSURL == "" {
		c.NATSURL = os.Getenv("NATS_URL")
	}
	c.KVBucket, c.KVReplicas = s.kv.Bucket, s.kv.Replicas
	n := s.nats
	c.NATSCreds, c.NATSNkey, c.NATSUser, c.NATSPassword = n.Creds, n.Nkey, n.User, n.Password
	c.NATSTLSCA, c.NATSTLSCert, c.NATSTLSKey = n.TLSCA, n.TLSCert, n.TLSKey
	c.StreamSubjects = splitList(s.streamSubjects)
	c.EmbeddedRoutes = splitList(s.embeddedRoutes)
	c.A2AAllowHosts = splitList(s.a2aAllowHosts)
	if s.createStream.set {
		c.CreateStream = &s.createStream.value
	}
	c.AttemptsMaxBytes, c.HeapFloor = uint64(s.attemptsBytes), uint64(s.heapFloor)
	c.Version = version
	log, err := newLogger(s.logFormat, stderr)
	c.Logger = log
	return c, err
}

// Message is err with the daemon's field names replaced by the flags
// that set them.
func Message(err error) string {
	var ce *daemon.ConfigError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	names := Names()
	renamed := ce.Message(func(field string) string {
		if f, ok := names[field]; ok {
			return "--" + f
		}
		return field
	})
	return strings.Replace(err.Error(), ce.Error(), renamed, 1)
}

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
