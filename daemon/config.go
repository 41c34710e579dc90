package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/events"
	"github.com/jetstream-bridge/bridge/lease"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// DefaultHeapFloor lets a bridge that holds little collect about once per
// 64 MiB allocated instead of once per live heap's worth: tailing a stream
// at 1,000 messages/s it held 12 MiB and collected every second, and the
// deliveries that met a mark phase were most of the slowest 1 %.
const DefaultHeapFloor = 64 << 20

// Config is everything a Daemon runs with. Each field of the first groups
// is one flag of `bridge run`, named beside it; start from DefaultConfig,
// which holds the flags' defaults, because a zero field is not a default
// (a zero MaxInFlight is refused, a false AttemptLog turns the log off).
// The last group holds what only a host program can give: its logger, its
// metrics registry, its NATS connection, its tracer provider.
type Config struct {
	// DataDir holds bridge.db, the embedded server's JetStream store
	// (nats/) and the generated admin-token (--data-dir).
	DataDir string

	// Store is where registrations live: "bolt" (bridge.db in DataDir,
	// one bridge) or "kv" (replicated JetStream key-value buckets shared
	// by several bridges) (--store).
	Store string
	// KVBucket is the name prefix of the kv store's buckets (--kv-bucket).
	KVBucket string
	// KVReplicas is the replicas of the kv store's buckets, and of the
	// journal and attempts streams the bridge creates (--kv-replicas).
	KVReplicas int
	// Instance names this bridge among those of the kv store; empty is the
	// host name with a random suffix (--instance).
	Instance string
	// LeaseTTL is how long this bridge's share of registrations outlives
	// its last contact with NATS (--lease-ttl).
	LeaseTTL time.Duration

	// NATSURL is the NATS server to join; empty with no Conn starts an
	// embedded nats-server with JetStream (--nats-url; the command also
	// reads NATS_URL, the library does not).
	NATSURL string
	// NATSCreds, NATSNkey, NATSUser, NATSPassword, NATSTLSCA, NATSTLSCert
	// and NATSTLSKey are the usual NATS client security, passed to nats.go
	// (--nats-creds, --nats-nkey, --nats-user, --nats-password,
	// --nats-tls-ca, --nats-tls-cert, --nats-tls-key).
	NATSCreds, NATSNkey, NATSUser, NATSPassword string
	NATSTLSCA, NATSTLSCert, NATSTLSKey          string

	// EmbeddedListen is the client address of the embedded server, so
	// publishers can reach it; port 0 picks a free one, which NATSURL
	// reports (--embedded-listen).
	EmbeddedListen string
	// EmbeddedCluster is the route address HOST:PORT at which the embedded
	// server joins a cluster with other bridges' embedded servers
	// (--embedded-cluster).
	EmbeddedCluster string
	// EmbeddedRoutes are the nats://HOST:PORT route addresses of that
	// cluster's servers (--embedded-routes, comma-separated).
	EmbeddedRoutes []string
	// EmbeddedName is the embedded server's name, unique in its cluster
	// (--embedded-name).
	EmbeddedName string

	// Stream is the journal stream (--stream).
	Stream string
	// StreamSubjects are the journal's subjects when the bridge creates it
	// (--stream-subjects, comma-separated).
	StreamSubjects []string
	// CreateStream says whether to create the journal when it is missing;
	// nil is true with the embedded server and false otherwise, so a
	// bridge never creates a stream on a NATS deployment unasked
	// (--create-stream).
	CreateStream *bool

	// AttemptLog records every POST in the AttemptsStream (--attempt-log).
	AttemptLog bool
	// AttemptsStream is the attempts stream, created or updated at start
	// (--attempts-stream).
	AttemptsStream string
	// AttemptsMaxAge and AttemptsMaxBytes bound the attempts stream
	// (--attempts-max-age, --attempts-max-bytes).
	AttemptsMaxAge   time.Duration
	AttemptsMaxBytes uint64

	// EventsPrefix is the subject prefix of the operational events
	// (--events-prefix).
	EventsPrefix string
	// FailingAfter is the consecutive failures at which
	// registration.failing is published; 0 publishes neither failing nor
	// recovered (--failing-after).
	FailingAfter int

	// AdminListen is the address of the admin API, /metrics, /healthz and
	// /readyz; port 0 picks a free one, which AdminAddr reports
	// (--admin-listen).
	AdminListen string
	// AdminTLSCert and AdminTLSKey are PEM files that make the admin
	// listener serve HTTPS, read again when they change
	// (--admin-tls-cert, --admin-tls-key).
	AdminTLSCert, AdminTLSKey string
	// AdminToken is the bearer token of /v1/*; empty reads or generates
	// DataDir/admin-token (--admin-token).
	AdminToken string

	// A2AAllowHosts are the exact hosts A2A webhooks may use; empty is
	// any public host (--a2a-allow-hosts, comma-separated).
	A2AAllowHosts []string
	// A2AAllowLoopback lets A2A webhooks use http:// on loopback
	// addresses, for tests and demos only (--a2a-allow-loopback).
	A2AAllowLoopback bool

	// MaxInFlight is how many POSTs the whole bridge has in flight at
	// once (--max-in-flight, CONTRACT §12): a registration without
	// ordering takes one of them, a keyed one up to its
	// ordering.maxInFlight, and none more than its fair share while
	// others wait.
	MaxInFlight int
	// MaxAttempts is the consecutive failures before a registration is
	// parked (--max-attempts).
	MaxAttempts int
	// RequestTimeout bounds one POST (--request-timeout).
	RequestTimeout time.Duration
	// FlushInterval is the longest an acknowledged cursor waits to be
	// made durable: what a crash can repeat (--flush-interval).
	FlushInterval time.Duration
	// HeapFloor is the heap size below which Go's collector does not run
	// while the daemon runs; 0 leaves GOGC alone (--heap-floor). The
	// collector is the process's: in a program running several daemons,
	// or one beside other work, give at most one a floor.
	HeapFloor uint64
	// CESource is the CloudEvents source of messages that are not
	// CloudEvents already; empty is /jetstream/<Stream> (--ce-source).
	CESource string
	// CEType is the CloudEvents type of messages without a ce-type header
	// (--ce-type).
	CEType string
	// DebugListen serves Go's /debug/pprof profiles on an address of its
	// own; empty serves none (--debug-listen).
	DebugListen string
	// NATSService registers the bridge with the NATS services framework
	// as ServiceName, so `nats micro ls|info|ping` find it, with a status
	// endpoint on StatusSubject(instance); false registers nothing
	// (--nats-service).
	NATSService bool

	// Logger receives the daemon's logs; nil discards them. (The command
	// builds it from --log-format.)
	Logger *slog.Logger
	// Registerer, when set, also receives the bridge's metrics, removed
	// again when Run returns; /metrics serves them either way. Two
	// daemons in one registry collide: wrap it with
	// prometheus.WrapRegistererWith to tell them apart.
	Registerer prometheus.Registerer
	// Conn is a NATS connection the host program already holds: the
	// daemon then starts no embedded server and dials nothing (NATSURL
	// and the security fields beside it are an error), and leaves the
	// connection open when it stops.
	Conn *nats.Conn
	// TracerProvider makes a span per POST. Nil reads the OTEL_*
	// environment variables as the command does: spans are exported over
	// OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set, and none are made
	// otherwise.
	TracerProvider trace.TracerProvider
	// Version is the release reported as service.version of exported
	// spans; empty is "dev".
	Version string
}

// DefaultConfig returns the configuration of `bridge run` without flags:
// an embedded NATS server on 127.0.0.1:4222, the admin API on
// 127.0.0.1:8480, state in ./bridge-data.
func DefaultConfig() Config {
	return Config{
		DataDir:          "./bridge-data",
		Store:            "bolt",
		KVBucket:         kvstore.DefaultPrefix,
		KVReplicas:       kvstore.DefaultReplicas,
		LeaseTTL:         lease.DefaultTTL,
		EmbeddedListen:   "127.0.0.1:4222",
		Stream:           "JOURNAL",
		StreamSubjects:   []string{"journal.>"},
		AttemptLog:       true,
		AttemptsStream:   attempt.DefaultStream,
		AttemptsMaxAge:   attempt.DefaultMaxAge,
		AttemptsMaxBytes: attempt.DefaultMaxBytes,
		EventsPrefix:     events.DefaultPrefix,
		FailingAfter:     events.DefaultFailingAfter,
		AdminListen:      "127.0.0.1:8480",
		MaxInFlight:      bridge.DefaultMaxInFlight,
		MaxAttempts:      bridge.DefaultMaxAttempts,
		RequestTimeout:   15 * time.Second,
		FlushInterval:    bridge.DefaultFlushInterval,
		HeapFloor:        DefaultHeapFloor,
		CEType:           "io.nats.jetstream.message",
		NATSService:      true,
	}
}

// A ConfigError is a field of Config the daemon refuses. New finds most
// before anything starts; Run finds those of files it reads (certificates,
// keys). Its message names the fields at fault, and Message renames them,
// so a program that sets fields from its own flags can name the flags.
type ConfigError struct {
	// Field is the field at fault, e.g. "FlushInterval".
	Field  string
	format string
	args   []any
}

// field marks an argument of a ConfigError's format as a field's name.
type field string

// configErr returns a ConfigError about f; format takes f's name first,
// and other fields' names where args hold them as field.
func configErr(f, format string, args ...any) *ConfigError {
	return &ConfigError{Field: f, format: format, args: append([]any{field(f)}, args...)}
}

// Error names the fields as Config does.
func (e *ConfigError) Error() string { return e.Message(func(f string) string { return f }) }

// Message is the error with every field called name(field).
func (e *ConfigError) Message(name func(field string) string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if f, ok := a.(field); ok {
			a = name(string(f))
		}
		args[i] = a
	}
	return fmt.Sprintf(e.format, args...)
}

// Unwrap returns the cause, when one was given.
func (e *ConfigError) Unwrap() error {
	for _, a := range e.args {
		if err, ok := a.(error); ok {
			return err
		}
	}
	return nil
}

// Validate refuses settings that could only fail later, per message or per
// registration; every error is a *ConfigError. New calls it; a program
// may call it first to report every bad setting before it builds anything.
func (c *Config) Validate() error {
	checks := []func() error{c.validateDelivery, c.validateStore, c.validateAttempts,
		c.validateEvents, c.validateNATS, c.validateEmbedded}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateDelivery() error {
	if c.CESource != "" {
		if err := cloudevents.CheckSource(c.CESource); err != nil {
			return configErr("CESource", "%s: %v", err)
		}
	}
	switch {
	case c.MaxInFlight <= 0:
		return configErr("MaxInFlight", "%s must be at least 1, got %d: zero would POST nothing while reporting a quiet plane", c.MaxInFlight)
	case c.MaxAttempts <= 0:
		return configErr("MaxAttempts", "%s must be at least 1, got %d", c.MaxAttempts)
	case c.RequestTimeout <= 0:
		return configErr("RequestTimeout", "%s must be positive, got %v", c.RequestTimeout)
	case c.FlushInterval <= 0 || c.FlushInterval > time.Minute:
		return configErr("FlushInterval", "%s must be positive and at most 1m, got %v: it is how much a crash repeats", c.FlushInterval)
	case c.Stream == "" || strings.ContainsAny(c.Stream, ". *>"):
		return configErr("Stream", "%s %q is not a valid stream name", c.Stream)
	}
	return nil
}

var (
	bucketName   = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)
	instanceName = regexp.MustCompile(`^[-_=a-zA-Z0-9]+$`)
	serverName   = regexp.MustCompile(`^[-_.=a-zA-Z0-9]+$`)
)

func (c *Config) validateStore() error {
	switch c.Store {
	case "bolt":
		return nil
	case "kv":
	default:
		return configErr("Store", "%s must be bolt or kv, got %q", c.Store)
	}
	switch {
	case !bucketName.MatchString(c.KVBucket):
		return configErr("KVBucket", "%s %q: only letters, digits, '-' and '_' are allowed", c.KVBucket)
	case c.KVReplicas < 1 || c.KVReplicas > 5:
		return configErr("KVReplicas", "%s must be between 1 and 5, got %d", c.KVReplicas)
	case c.LeaseTTL < lease.MinTTL:
		return configErr("LeaseTTL", "%s must be at least %v, got %v", lease.MinTTL, c.LeaseTTL)
	case c.Instance != "" && !instanceName.MatchString(c.Instance):
		return configErr("Instance", "%s %q: only letters, digits, '-', '_' and '=' are allowed", c.Instance)
	}
	return nil
}

func (c *Config) validateAttempts() error {
	switch {
	case !c.AttemptLog:
		return nil
	case c.AttemptsStream == "" || len(c.AttemptsStream) > 255 || strings.ContainsAny(c.AttemptsStream, ". *>\t\r\n"):
		return configErr("AttemptsStream", "%s %q is not a valid stream name", c.AttemptsStream)
	case c.AttemptsMaxAge <= 0:
		return configErr("AttemptsMaxAge", "%s must be positive, got %v: the log is bounded by default", c.AttemptsMaxAge)
	case c.AttemptsMaxBytes == 0:
		return configErr("AttemptsMaxBytes", "%s must be positive: the log is bounded by default")
	}
	return nil
}

func (c *Config) validateEvents() error {
	switch p := c.EventsPrefix; {
	case !validPrefix(p):
		return configErr("EventsPrefix", "%s %q is not a subject prefix: dot-separated tokens without spaces or wildcards", p)
	case p == attempt.SubjectRoot || strings.HasPrefix(p, attempt.SubjectRoot+"."):
		return configErr("EventsPrefix", "%s %q lies under the attempt log's subjects (%s.>)", p, attempt.SubjectRoot)
	case c.FailingAfter < 0:
		return configErr("FailingAfter", "%s must be 0 (off) or more, got %d", c.FailingAfter)
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

// validateNATS refuses a connection given beside the settings of one the
// daemon would make, which it would silently ignore.
func (c *Config) validateNATS() error {
	if (c.NATSTLSCert == "") != (c.NATSTLSKey == "") {
		return configErr("NATSTLSCert", "%s and %s go together", field("NATSTLSKey"))
	}
	if c.Conn == nil {
		return nil
	}
	for _, f := range []struct{ name, value string }{{"NATSURL", c.NATSURL}, {"NATSCreds", c.NATSCreds},
		{"NATSNkey", c.NATSNkey}, {"NATSUser", c.NATSUser}, {"NATSPassword", c.NATSPassword},
		{"NATSTLSCA", c.NATSTLSCA}, {"NATSTLSCert", c.NATSTLSCert}} {
		if f.value != "" {
			return configErr(f.name, "%s is set beside Conn, which replaces it: give one")
		}
	}
	return nil
}

// validateEmbedded refuses addresses the server would only reject once
// started, and cluster settings that a bridge joining an outside NATS
// would ignore.
func (c *Config) validateEmbedded() error {
	external := c.NATSURL != "" || c.Conn != nil
	if c.EmbeddedCluster == "" {
		if len(c.EmbeddedRoutes) > 0 {
			return configErr("EmbeddedRoutes", "%s needs %s, the address the other servers route to", field("EmbeddedCluster"))
		}
	} else if _, err := hostPort(c.EmbeddedCluster); err != nil {
		return configErr("EmbeddedCluster", "%s %q: %v", c.EmbeddedCluster, err)
	}
	if external && (c.EmbeddedCluster != "" || c.EmbeddedName != "") {
		return configErr("EmbeddedCluster", "%s and %s configure the embedded server, which %s (or NATS_URL) replaces",
			field("EmbeddedName"), field("NATSURL"))
	}
	if _, err := routeURLs(c.EmbeddedRoutes); err != nil {
		return err
	}
	if c.EmbeddedName != "" && !serverName.MatchString(c.EmbeddedName) {
		return configErr("EmbeddedName", "%s %q: only letters, digits, '-', '_', '=' and '.' are allowed", c.EmbeddedName)
	}
	return nil
}

// hostPort splits HOST:PORT, the port a number from 1 to 65535: the other
// servers must be able to route to it, so 0 (any port) is refused.
func hostPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return port, nil
}

func routeURLs(routes []string) ([]*url.URL, error) {
	var out []*url.URL
	for _, r := range routes {
		u, err := url.Parse(r)
		if err == nil && (u.Scheme != "nats" || u.Host == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "") {
			err = errors.New("want nats://HOST:PORT")
		}
		if err == nil {
			_, err = hostPort(u.Host)
		}
		if err != nil {
			return nil, configErr("EmbeddedRoutes", "%s %q: %v", r, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// withDerived fills in what follows from other fields: the instance name
// of a kv store bridge, the CloudEvents source, a logger, the version.
func (c Config) withDerived() Config {
	if c.Store == "kv" && c.Instance == "" {
		c.Instance = defaultInstance()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return c
}

// ceSource is the CloudEvents source of messages that are not CloudEvents.
func (c *Config) ceSource() string {
	if c.CESource != "" {
		return c.CESource
	}
	return "/jetstream/" + c.Stream
}

// embedded reports whether the daemon starts its own nats-server.
func (c *Config) embedded() bool { return c.NATSURL == "" && c.Conn == nil }

// instanceName names this bridge in its events: Instance with the kv
// store, else the host.
func (c *Config) instanceName() string {
	if c.Instance != "" {
		return c.Instance
	}
	return hostLabel()
}

// defaultInstance is the host name with a random suffix, so two bridges
// on one host never collide by default.
func defaultInstance() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hostLabel() + "-" + hex.EncodeToString(b)
}

// hostLabel is the host name with every character a name of the cluster
// (instance or server) cannot hold replaced by '-'; "bridge" without one.
func hostLabel() string {
	host, err := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < 0x80 && instanceName.MatchString(string(r)) {
			return r
		}
		return '-'
	}, host)
	if err != nil || host == "" {
		return "bridge"
	}
	return host
}
