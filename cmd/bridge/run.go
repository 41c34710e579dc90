package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/internal/heapfloor"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
)

// runConfig is every flag of `bridge run`.
type runConfig struct {
	dataDir        string
	store          storeFlags
	natsURL        string
	natsSecurity   natsClientFlags
	embeddedListen string
	cluster        embeddedCluster
	stream         string
	streamSubjects string
	attempts       attemptFlags
	events         eventFlags
	createStream   optionalBool
	adminListen    string
	adminTLS       adminTLS
	adminToken     string
	a2aAllowHosts  string
	a2aAllowLoop   bool
	maxInFlight    int
	maxAttempts    int
	requestTimeout time.Duration
	flushInterval  time.Duration
	heapFloor      byteSize
	ceSource       string
	ceType         string
	logFormat      string
	debugListen    string
}

// defaultHeapFloor lets a bridge that holds little collect about once per
// 64 MiB allocated instead of once per live heap's worth: tailing a stream
// at 1,000 messages/s it held 12 MiB and collected every second, and the
// deliveries that met a mark phase were most of the slowest 1 %.
const defaultHeapFloor = 64 << 20

// byteSize is a flag of bytes: a number with an optional KiB, MiB or GiB.
type byteSize uint64

func (b *byteSize) String() string {
	for _, u := range sizeUnits() {
		if *b != 0 && uint64(*b)%u.n == 0 {
			return fmt.Sprintf("%d%s", uint64(*b)/u.n, u.suffix)
		}
	}
	return fmt.Sprint(uint64(*b))
}

type sizeUnit struct {
	suffix string
	n      uint64
}

// sizeUnits are the suffixes byteSize reads and writes, largest first.
func sizeUnits() [3]sizeUnit {
	return [...]sizeUnit{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
}

func (b *byteSize) Set(s string) error {
	num, mult := s, uint64(1)
	for _, u := range sizeUnits() {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.n
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > math.MaxUint64/mult {
		return fmt.Errorf("%q is not a size in bytes (a number, optionally with KiB, MiB or GiB)", s)
	}
	*b = byteSize(n * mult)
	return nil
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

func runFlags(stderr io.Writer) (*flag.FlagSet, *runConfig) {
	c := &runConfig{}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dataDir, "data-dir", "./bridge-data", "directory for bridge.db, the embedded server's JetStream store and the admin token")
	c.store.register(fs)
	fs.StringVar(&c.natsURL, "nats-url", "", "NATS server to join (also NATS_URL); empty starts an embedded nats-server with JetStream")
	c.natsSecurity.register(fs)
	fs.StringVar(&c.embeddedListen, "embedded-listen", "127.0.0.1:4222", "client address of the embedded server")
	c.cluster.register(fs)
	fs.StringVar(&c.stream, "stream", "JOURNAL", "the journal stream")
	fs.StringVar(&c.streamSubjects, "stream-subjects", "journal.>", "subjects (comma-separated) when the bridge creates the stream")
	fs.Var(&c.createStream, "create-stream", "create the stream if missing (default true when embedded, false otherwise)")
	c.attempts.register(fs)
	c.events.register(fs)
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:8480", "address of the admin API, /metrics, /healthz and /readyz")
	c.adminTLS.register(fs)
	fs.StringVar(&c.adminToken, "admin-token", "", "bearer token for /v1/*; empty generates one into <data-dir>/admin-token")
	fs.StringVar(&c.a2aAllowHosts, "a2a-allow-hosts", "", "comma-separated exact hosts A2A webhooks may use (empty = any public host)")
	fs.BoolVar(&c.a2aAllowLoop, "a2a-allow-loopback", false, "let A2A webhooks use http:// on loopback addresses (tests, demos)")
	fs.IntVar(&c.maxInFlight, "max-in-flight", bridge.DefaultMaxInFlight, "receivers one sweep talks to at once")
	fs.IntVar(&c.maxAttempts, "max-attempts", bridge.DefaultMaxAttempts, "consecutive failures before a registration is parked")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 15*time.Second, "timeout of one POST")
	fs.DurationVar(&c.flushInterval, "flush-interval", bridge.DefaultFlushInterval, "longest an acknowledged cursor waits to be made durable: what a crash can repeat")
	c.heapFloor = defaultHeapFloor
	fs.Var(&c.heapFloor, "heap-floor", "heap size below which Go's collector does not run, so a small heap is not collected every few MiB (0 = GOGC alone)")
	fs.StringVar(&c.ceSource, "ce-source", "", "CloudEvents source for messages that are not CloudEvents already (default /jetstream/<stream>)")
	fs.StringVar(&c.ceType, "ce-type", "io.nats.jetstream.message", "CloudEvents type for messages without a ce-type header")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&c.debugListen, "debug-listen", "", "address for Go's /debug/pprof profiles (empty = off; never expose it publicly)")
	return fs, c
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c := runFlags(stderr)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bridge run:", err)
		return 2
	}
	if c.natsURL == "" {
		c.natsURL = os.Getenv("NATS_URL")
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bridge run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log, err := newLogger(c.logFormat, stderr)
	if err == nil {
		err = c.validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, "bridge run:", err)
		return 2
	}
	stop := announceStop(ctx, log)
	defer stop()
	// The collector's percentage is the process's, so the daemon's
	// command sets it, not a package the tests run in-process.
	defer heapfloor.Keep(uint64(c.heapFloor))()
	if err := serve(ctx, c, log); err != nil {
		log.Error("bridge stopped", "error", err)
		fmt.Fprintln(stderr, "bridge run:", err)
		return 1
	}
	return 0
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

// announceStop logs the start of a clean stop. main cancels ctx on the
// first SIGINT or SIGTERM and restores the default handling, so a second
// signal ends the process at once.
func announceStop(ctx context.Context, log *slog.Logger) func() bool {
	return context.AfterFunc(ctx, func() {
		log.Info("stopping: finishing in-flight deliveries and flushing cursors (signal again to exit at once)")
	})
}

// validate refuses flag values that could only fail later, per message or
// per registration, before anything is started.
func (c *runConfig) validate() error {
	if c.ceSource != "" {
		if err := cloudevents.CheckSource(c.ceSource); err != nil {
			return fmt.Errorf("--ce-source: %w", err)
		}
	}
	if c.maxInFlight <= 0 {
		return fmt.Errorf("--max-in-flight must be at least 1, got %d: zero would contact no receiver while reporting a quiet plane", c.maxInFlight)
	}
	if c.maxAttempts <= 0 {
		return fmt.Errorf("--max-attempts must be at least 1, got %d", c.maxAttempts)
	}
	if c.requestTimeout <= 0 {
		return fmt.Errorf("--request-timeout must be positive, got %v", c.requestTimeout)
	}
	if c.flushInterval <= 0 || c.flushInterval > time.Minute {
		return fmt.Errorf("--flush-interval must be positive and at most 1m, got %v: it is how much a crash repeats", c.flushInterval)
	}
	if err := c.store.validate(); err != nil {
		return err
	}
	if err := c.attempts.validate(); err != nil {
		return err
	}
	if err := c.events.validate(); err != nil {
		return err
	}
	if c.stream == "" || strings.ContainsAny(c.stream, ". *>") {
		return fmt.Errorf("--stream %q is not a valid stream name", c.stream)
	}
	return c.cluster.validate(c.natsURL != "")
}
