package attempt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the attempts stream (CONTRACT §7).
const (
	DefaultStream   = "BRIDGE_ATTEMPTS"
	DefaultMaxAge   = 168 * time.Hour
	DefaultMaxBytes = 1 << 30
	// DefaultBuffer is how many records may wait for NATS before new ones
	// are dropped: seconds of a busy bridge's POSTs, a few MiB at most.
	DefaultBuffer = 8192
	// SubjectRoot is where every attempts stream's subjects live, apart
	// from the journal's (journal.>) and the events' (bridge.events.>).
	SubjectRoot = "bridge.attempts"
)

// publishBatch is how many queued records one round of the recording
// goroutine takes: their attempt numbers are looked up in one request.
const publishBatch = 256

// DefaultLinger is how long a record may wait for others to leave with:
// short beside the time anyone reads the log, long beside the gaps
// between POSTs of a busy bridge.
const DefaultLinger = 10 * time.Millisecond

// recentMax bounds the attempt numbers kept in memory; past it they are
// forgotten at once and looked up in the stream again when needed.
const recentMax = 1 << 16

// Config says which stream holds the log and how it is bounded.
type Config struct {
	// Stream is the attempts stream; empty means DefaultStream.
	Stream   string
	MaxAge   time.Duration
	MaxBytes int64
	// Replicas of the stream; 0 means 1. Bridges sharing a kv store give
	// it their buckets' replicas, so the log survives what they survive.
	Replicas int
	// Buffer bounds the records waiting for NATS; 0 means DefaultBuffer.
	Buffer int
	// Linger is how long a record waits for others to be published with;
	// 0 means DefaultLinger.
	Linger time.Duration
	Logger *slog.Logger
}

// Log records attempts into the attempts stream and reads them back.
//
// Record hands a record to one goroutine and returns at once; that
// goroutine numbers it and publishes it asynchronously with a bounded
// number of publishes awaiting their acknowledgement. A record the buffer
// cannot take, a publish NATS refuses and an acknowledgement that never
// comes are counted in bridge_attempts_dropped_total and logged once per
// minute at most, so a NATS outage shows without flooding the log.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	prefix string
	direct string
	linger time.Duration
	log    *slog.Logger

	queue   chan Attempt
	flushes chan chan struct{}
	done    chan struct{}
	closing sync.Once

	dropped  prometheus.Counter
	drops    atomic.Uint64
	lastWarn atomic.Int64

	// recent holds the last attempt number and outcome of recently
	// recorded message indexes; only the recording goroutine uses it.
	recent map[key]last
}

// key names one message index of one registration.
type key struct {
	reg   string
	seq   uint64
	index int
}

type last struct {
	n  uint32
	ok bool
}

// Subjects are the attempts stream's subjects for stream name.
func Subjects(stream string) string { return SubjectRoot + "." + stream + ".>" }

// Open creates the attempts stream or sets its limits to cfg's, and
// starts recording.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Log, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		nc: nc, stream: cfg.Stream, log: cfg.Logger, linger: cfg.Linger,
		prefix:  SubjectRoot + "." + cfg.Stream,
		queue:   make(chan Attempt, cfg.Buffer),
		flushes: make(chan chan struct{}),
		done:    make(chan struct{}),
		recent:  make(map[key]last),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bridge_attempts_dropped_total",
			Help: "Attempt records lost because NATS could not take them; the deliveries themselves went on.",
		}),
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.Buffer),
		jetstream.WithPublishAsyncTimeout(5*time.Second),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, _ error) { l.drop(recordsIn(m)) }))
	if err != nil {
		return nil, err
	}
	l.js = js
	l.direct = "$JS.API.DIRECT.GET." + cfg.Stream
	if err := l.ensure(ctx, cfg); err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

func (l *Log) ensure(ctx context.Context, cfg Config) error {
	sc := jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "webhook bridge attempt log: one record per POST",
		Subjects:    []string{Subjects(cfg.Stream)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    cfg.MaxBytes,
		Replicas:    max(cfg.Replicas, 1),
		AllowDirect: true,
	}
	if _, err := l.js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("attempt log: creating or updating stream %s (subjects %s) on %s: %w",
			cfg.Stream, sc.Subjects[0], l.nc.ConnectedUrlRedacted(), err)
	}
	return nil
}

// Collectors are the log's Prometheus series.
func (l *Log) Collectors() []prometheus.Collector { return []prometheus.Collector{l.dropped} }

// Stream is the attempts stream's name.
func (l *Log) Stream() string { return l.stream }

// Record queues a for the log and returns at once. A full buffer drops
// it: the POST it describes has happened and must not wait for its
// record.
func (l *Log) Record(a Attempt) {
	select {
	case l.queue <- a:
	default:
		l.drop(1)
	}
}

// Close stops recording after what was queued is handed to NATS, waiting
// at most until ctx ends for the acknowledgements.
func (l *Log) Close(ctx context.Context) {
	l.closing.Do(func() { close(l.queue) })
	select {
	case <-l.done:
	case <-ctx.Done():
		return
	}
	select {
	case <-l.js.PublishAsyncComplete():
	case <-ctx.Done():
	}
}

func (l *Log) drop(n uint64) {
	l.dropped.Add(float64(n))
	total := l.drops.Add(n)
	now := time.Now().UnixNano()
	prev := l.lastWarn.Load()
	if now-prev < int64(time.Minute) || !l.lastWarn.CompareAndSwap(prev, now) {
		return
	}
	l.log.Warn("attempt log: NATS could not take attempt records; deliveries go on, the records are lost (bridge_attempts_dropped_total)",
		"stream", l.stream, "droppedSoFar", total)
}

// run numbers and publishes queued records, a batch at a time. After a
// batch's first record it waits for linger, or for a flush, and then takes
// what queued meanwhile: records leaving one by one cost a wakeup of this
// goroutine, a socket write and an acknowledgement round each, which on a
// busy machine is what the log costs deliveries. Waiting on a timer
// rather than on the queue lets Record hand a record over without waking
// anyone.
func (l *Log) run() {
	defer close(l.done)
	batch := make([]Attempt, 0, publishBatch)
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	for {
		var flushed chan struct{}
		select {
		case a, ok := <-l.queue:
			if !ok {
				return
			}
			batch = append(batch[:0], a)
			wait.Reset(l.linger)
			select {
			case <-wait.C:
			case flushed = <-l.flushes:
				wait.Stop()
			}
		case flushed = <-l.flushes:
			batch = batch[:0]
		}
		open := l.publishQueued(batch)
		if flushed != nil {
			close(flushed)
		}
		if !open {
			return
		}
	}
}

// publishQueued publishes batch and everything queued behind it;
// false once the queue is closed and empty.
func (l *Log) publishQueued(batch []Attempt) bool {
	for {
		var open bool
		batch, open = l.take(batch)
		l.number(batch)
		l.publishGroups(batch)
		if !open || len(batch) < publishBatch {
			return open
		}
		batch = batch[:0]
	}
}

// take appends to batch what is queued, up to publishBatch, without
// waiting; open is false once the queue is closed and empty.
func (l *Log) take(batch []Attempt) ([]Attempt, bool) {
	for len(batch) < publishBatch {
		select {
		case a, ok := <-l.queue:
			if !ok {
				return batch, false
			}
			batch = append(batch, a)
		default:
			return batch, true
		}
	}
	return batch, true
}

// Flush hands every record queued so far to NATS and waits for their
// acknowledgements, or until ctx ends.
func (l *Log) Flush(ctx context.Context) {
	done := make(chan struct{})
	select {
	case l.flushes <- done:
	case <-l.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
		return
	}
	select {
	case <-l.js.PublishAsyncComplete():
	case <-ctx.Done():
	}
}

// publishGroups publishes batch as one message per registration and
// bucket of sequences, each the JSON array of its records in POST order.
//
// One message per POST cost as much as the deliveries it recorded: the
// nats-server stores, indexes and acknowledges each message, which in
// the bench's fan-out (S2) took a third of the machine's deliveries. A
// bucket of 1<<bucketBits sequences keeps a registration's records and a
// sequence's each one filtered read: *.<id> and <bucket>.*.
func (l *Log) publishGroups(batch []Attempt) {
	var order []key
	groups := map[key][]*Attempt{}
	for i := range batch {
		a := &batch[i]
		g := key{reg: a.Registration, seq: a.Seq >> bucketBits}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], a)
	}
	for _, g := range order {
		recs := groups[g]
		data, err := encodeGroup(recs)
		if err != nil {
			l.drop(uint64(len(recs)))
			continue
		}
		if _, err := l.js.PublishAsync(l.bucketSubject(g.reg, g.seq<<bucketBits), data); err != nil {
			l.drop(uint64(len(recs)))
		}
	}
}

// encodeGroup is the JSON array of recs with one record per line: JSON
// escapes a newline inside a string, so a reader finds each record by
// splitting the lines and decodes only those it wants (see records).
func encodeGroup(recs []*Attempt) ([]byte, error) {
	buf := []byte("[\n")
	for i, a := range recs {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		buf = append(buf, b...)
		if i < len(recs)-1 {
			buf = append(buf, ',')
		}
		buf = append(buf, '\n')
	}
	return append(buf, ']'), nil
}

// recordsIn counts the records of a message NATS did not take.
func recordsIn(m *nats.Msg) uint64 { return uint64(max(bytes.Count(m.Data, []byte{'\n'})-1, 1)) }

// bucketBits sizes a bucket: 16 sequences, so a sequence's lookup
// decodes at most 16 records per registration that POSTed it.
const bucketBits = 4

// bucketSubject is the subject of registration reg's records of the
// bucket holding seq: <prefix>.<bucket>.<id>.
//
// The bucket comes first because buckets follow time: a block of the
// stream holds a few buckets and many registrations, so the server
// matching *.<id> in a block walks a few bucket nodes, and <bucket>.*
// one. With the id first, matching *.<bucket> walked every
// registration of every block the read crossed (A1's sequence lookup).
func (l *Log) bucketSubject(reg string, seq uint64) string {
	return l.bucketPrefix(seq) + "." + encodeID(reg)
}

func (l *Log) bucketPrefix(seq uint64) string {
	return l.prefix + "." + strconv.FormatUint(seq>>bucketBits, 10)
}

// encodeID makes a registration id one subject token: ids may hold dots.
func encodeID(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// number fills in the attempt numbers the worker left to the log (0):
// one after the last recorded POST of the same message index, from
// memory when it was recent and otherwise from the stream, one read per
// bucket. A POST whose last one failed is a retry whatever the worker
// guessed. A delivery the log remembers nothing of is a first POST and
// is not looked up: that keeps a live stream of deliveries from costing
// a request each.
func (l *Log) number(batch []Attempt) {
	looked := map[key]bool{}
	for i := range batch {
		a := &batch[i]
		if a.Attempt != 0 || a.Trigger == TriggerDelivery {
			continue
		}
		b := key{reg: a.Registration, seq: a.Seq >> bucketBits}
		if _, ok := l.recent[keyOf(a)]; !ok && !looked[b] {
			looked[b] = true
			l.lookup(a.Registration, a.Seq)
		}
	}
	if len(l.recent)+len(batch) > recentMax {
		clear(l.recent)
	}
	for i := range batch {
		a := &batch[i]
		k := keyOf(a)
		if a.Attempt == 0 {
			a.Attempt = 1
			if prev, ok := l.recent[k]; ok {
				a.Attempt = prev.n + 1
				if !prev.ok && a.Trigger != TriggerResend {
					a.Trigger = TriggerRetry
				}
			}
		}
		l.recent[k] = last{n: a.Attempt, ok: a.Outcome == Outcome2xx}
	}
}

func keyOf(a *Attempt) key { return key{reg: a.Registration, seq: a.Seq, index: a.Index} }

// lookup loads the last attempt of every message index of seq's bucket
// into recent. A failed lookup numbers those records as first attempts:
// a wrong number is better than a record held back or lost.
func (l *Log) lookup(reg string, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	recs, err := l.bucketOf(ctx, reg, seq)
	if err != nil {
		l.log.Debug("attempt log: looking up earlier attempts", "error", err)
		return
	}
	for i := range recs {
		l.recent[keyOf(&recs[i])] = last{n: recs[i].Attempt, ok: recs[i].Outcome == Outcome2xx}
	}
}

// Number gives a, a POST about to be recorded, the attempt number after
// the last one the stream holds for its message index: a resend answers
// its number at once, instead of leaving it to the recording goroutine.
// What was recorded before is flushed to the stream first, so the POST
// just made is counted; a resend is rare enough to wait the milliseconds.
func (l *Log) Number(ctx context.Context, a *Attempt) {
	a.Attempt = 1
	l.Flush(ctx)
	recs, err := l.bucketOf(ctx, a.Registration, a.Seq)
	if err != nil {
		return
	}
	k := keyOf(a)
	for i := range recs {
		if keyOf(&recs[i]) == k {
			a.Attempt = recs[i].Attempt + 1
		}
	}
}

// getRequest is a direct get request as the server reads it.
type getRequest struct {
	Seq    uint64 `json:"seq,omitempty"`
	NextBy string `json:"next_by_subj,omitempty"`
	Batch  int    `json:"batch,omitempty"`
}

// errGet is a direct get the server answered with an error status.
var errGet = errors.New("attempt log: direct get failed")

// get sends one direct get and returns the messages it answered, in
// stream order; none when nothing matched.
func (l *Log) get(ctx context.Context, req getRequest) ([]*nats.Msg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	inbox := l.nc.NewInbox()
	sub, err := l.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := l.nc.PublishRequest(l.direct, inbox, body); err != nil {
		return nil, err
	}
	var out []*nats.Msg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("attempt log: reading stream %s: %w", l.stream, err)
		}
		if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
			switch status {
			case "404", "204":
				return out, nil
			}
			return nil, fmt.Errorf("%w: stream %s answered %s %s", errGet, l.stream, status, m.Header.Get("Description"))
		}
		out = append(out, m)
		if req.Batch == 0 {
			return out, nil
		}
	}
}
