package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/webhook"
)

// attemptFlags configure the attempt log of `bridge run`.
type attemptFlags struct {
	on       bool
	stream   string
	maxAge   time.Duration
	maxBytes byteSize
}

func (a *attemptFlags) register(fs *flag.FlagSet) {
	a.maxBytes = attempt.DefaultMaxBytes
	fs.BoolVar(&a.on, "attempt-log", true, "record every POST in the attempts stream")
	fs.StringVar(&a.stream, "attempts-stream", attempt.DefaultStream, "the attempts stream, created or updated at start")
	fs.DurationVar(&a.maxAge, "attempts-max-age", attempt.DefaultMaxAge, "how long the attempts stream keeps a record")
	fs.Var(&a.maxBytes, "attempts-max-bytes", "how many bytes the attempts stream keeps (KiB, MiB, GiB suffixes)")
}

func (a *attemptFlags) validate() error {
	switch {
	case !a.on:
		return nil
	case a.stream == "" || len(a.stream) > 255 || strings.ContainsAny(a.stream, ". *>\t\r\n"):
		return fmt.Errorf("--attempts-stream %q is not a valid stream name", a.stream)
	case a.maxAge <= 0:
		return fmt.Errorf("--attempts-max-age must be positive, got %v: the log is bounded by default", a.maxAge)
	case a.maxBytes == 0:
		return fmt.Errorf("--attempts-max-bytes must be positive: the log is bounded by default")
	}
	return nil
}

// openAttempts starts the attempt log, or returns nil with
// --attempt-log=false. The stream is created with the kv store's replicas,
// so the log survives what the registrations survive, and its limits are
// set to the flags' values on every start.
func openAttempts(ctx context.Context, c *runConfig, nc *nats.Conn, log *slog.Logger) (*attempt.Log, error) {
	a := &c.attempts
	if !a.on {
		log.Info("attempt log off (--attempt-log=false): POSTs are not recorded")
		return nil, nil
	}
	replicas := 1
	if c.store.store == "kv" {
		replicas = c.store.kv.replicas
	}
	var l *attempt.Log
	err := untilSettled(ctx, log, "the attempts stream "+a.stream, func(ctx context.Context) (err error) {
		l, err = attempt.Open(ctx, nc, attempt.Config{
			Stream: a.stream, MaxAge: a.maxAge, MaxBytes: int64(a.maxBytes), Replicas: replicas, Logger: log,
		})
		return err
	})
	if err != nil {
		return nil, noRoomHint(err, a.maxBytes)
	}
	log.Info("attempt log: every POST is recorded; the log is bounded, the oldest records go first",
		"stream", a.stream, "subjects", attempt.Subjects(a.stream), "maxAge", a.maxAge, "maxBytes", a.maxBytes.String(), "replicas", replicas)
	return l, nil
}

func cmdAttempts(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	seq := fs.Uint64("seq", 0, "only the attempts for this stream sequence")
	limit := fs.Int("limit", 0, "attempts to show, newest first (1-1000; default 100)")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	var id string
	switch rest := fs.Args(); {
	case len(rest) > 1:
		return usagef("unexpected argument %q (flags must precede arguments)", rest[1])
	case len(rest) == 1:
		id = rest[0]
	case !isSet(fs, "seq"):
		return usagef("give a registration ID, --seq N, or both")
	}
	if *limit < 0 || *limit > attempt.MaxLimit {
		return usagef("--limit must be from 1 to %d, not %d", attempt.MaxLimit, *limit)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	// With --seq the sequence's own read answers, narrowed to ID when one
	// is given: one filtered read either way.
	q := url.Values{}
	path := "/v1/attempts"
	if isSet(fs, "seq") {
		q.Set("seq", strconv.FormatUint(*seq, 10))
	} else {
		path = registrationPath(id) + "/attempts"
		if *limit != 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
	}
	data, err := c.call(ctx, "GET", path+"?"+q.Encode(), nil, nil)
	if err != nil {
		return err
	}
	var page admin.AttemptPage
	if err := decodeAnswer(data, &page); err != nil {
		return err
	}
	narrowed := isSet(fs, "seq") && (id != "" || *limit != 0)
	if narrowed {
		page.Attempts = narrow(page.Attempts, id, *limit)
	}
	switch {
	case cf.json && narrowed:
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		return enc.Encode(admin.AttemptList{Attempts: page.Attempts})
	case cf.json:
		_, err := s.out.Write(data)
		return err
	}
	return printAttempts(s.out, page.Attempts)
}

// narrow keeps registration id's attempts (all with id empty), at most
// limit of them (all with 0).
func narrow(in []attempt.Attempt, id string, limit int) []attempt.Attempt {
	out := []attempt.Attempt{}
	for _, a := range in {
		if (id == "" || a.Registration == id) && (limit == 0 || len(out) < limit) {
			out = append(out, a)
		}
	}
	return out
}

func cmdResend(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	seq := fs.Uint64("seq", 0, "the stream sequence of the message to send again")
	id, err := s.parseID(fs, args)
	if err != nil {
		return err
	}
	if *seq == 0 {
		return usagef("--seq is required")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	data, err := c.call(ctx, "POST", registrationPath(id)+"/resend", map[string]uint64{"seq": *seq}, nil)
	if err != nil {
		return err
	}
	if cf.json {
		_, err := s.out.Write(data)
		return err
	}
	var list admin.AttemptList
	if err := decodeAnswer(data, &list); err != nil {
		return err
	}
	if list.Attempts == nil { // one POST: the answer is the attempt itself
		var one attempt.Attempt
		if err := decodeAnswer(data, &one); err != nil {
			return err
		}
		list.Attempts = []attempt.Attempt{one}
	}
	return printAttempts(s.out, list.Attempts)
}

// printAttempts prints a table of attempts, newest first as answered.
func printAttempts(w io.Writer, list []attempt.Attempt) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no attempts")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "AT\tREGISTRATION\tSEQ\tINDEX\tATTEMPT\tTRIGGER\tOUTCOME\tSTATUS\tMS\tERROR")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%s\n", a.At.Format(time.RFC3339Nano), a.Registration,
			a.Seq, a.Index, a.Attempt, a.Trigger, a.Outcome, a.Status, a.DurationMs, clip(oneLine(a.Error), maxLastErrorWidth))
	}
	return tw.Flush()
}

// closeAttempts hands what is queued to NATS before the connection closes.
func closeAttempts(l *attempt.Log) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.Close(ctx)
}

// What the attempt log adds to the sender, the workers, the admin API
// and the registry; nothing when it is off.

func responseBody(l *attempt.Log) webhook.Option {
	if l == nil {
		return webhook.WithResponseBody(0)
	}
	return webhook.WithResponseBody(attempt.MaxResponse)
}

func recording(l *attempt.Log) []bridge.Option {
	if l == nil {
		return nil
	}
	return []bridge.Option{bridge.WithRecorder(l)}
}

func attemptReader(l *attempt.Log) admin.Attempts {
	if l == nil {
		return nil // a nil *attempt.Log in the interface would not be nil
	}
	return l
}

func attemptCollectors(l *attempt.Log) []prometheus.Collector {
	if l == nil {
		return nil
	}
	return l.Collectors()
}

// codeInsufficientStorage is JetStream's "insufficient storage resources
// available": a stream's max_bytes beyond what the server can reserve.
const codeInsufficientStorage = 10047

// noRoomHint adds to JetStream's refusal to reserve the log's bytes what
// the operator can do about it.
func noRoomHint(err error, maxBytes byteSize) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == codeInsufficientStorage {
		return fmt.Errorf("%w: the server cannot reserve --attempts-max-bytes %s for the attempt log; lower it, give JetStream more storage, or run with --attempt-log=false", err, maxBytes.String())
	}
	return err
}
