package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/ask"
	"github.com/jetstream-bridge/bridge/projection"
)

const (
	// DefaultCacheBytes bounds the memory a Reader keeps messages in.
	DefaultCacheBytes = 64 << 20
	// fetchBatch is the fewest messages one server fetch asks for, so the
	// registrations following one filter share pages instead of each
	// fetching the few it needs.
	fetchBatch = 256
	// maxFetchBytes bounds one direct get answer; the server stops after
	// the message that crosses it, so one large message still comes back.
	maxFetchBytes  = 4 << 20
	defaultTimeout = 5 * time.Second
)

// ErrClosed is returned by a Reader after Close.
var ErrClosed = errors.New("journal: reader is closed")

// ErrStreamRecreated is matched (errors.Is) by the *RecreatedError that
// Read returns while a re-created stream awaits ConfirmStream.
var ErrStreamRecreated = errors.New("journal: stream was deleted and re-created")

// RecreatedError reports that the stream the reader serves was deleted and
// created again. Its sequences restarted, so a sequence taken against the
// old stream names another message in the new one: Read serves nothing
// until the caller has dealt with its old sequences and calls ConfirmStream.
type RecreatedError struct {
	Stream string
	// Was is the creation time reads were confirmed against; Now is the
	// current stream's.
	Was, Now time.Time
}

func (e *RecreatedError) Error() string {
	return fmt.Sprintf("journal: stream %s was deleted and re-created (created %s, reads were confirmed against the stream created %s): its sequences restarted",
		e.Stream, e.Now.UTC().Format(time.RFC3339Nano), e.Was.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrStreamRecreated) hold.
func (e *RecreatedError) Is(target error) bool { return target == ErrStreamRecreated }

// errUnsettled ends a read during which the stream kept changing under it.
var errUnsettled = errors.New("journal: the stream changed during the read (consumer reset or re-creation); read again")

// Page is one answer to Read.
type Page struct {
	// Records are the messages matching the filter with From <= Seq,
	// ascending, at most the read's limit. They are shared with other readers:
	// callers must not modify a record's Header or Data.
	Records []projection.Record
	// From is where the page starts: the requested sequence, moved past
	// the sequences the stream no longer holds.
	From uint64
	// Skipped = From - the requested sequence (read as at least 1): stream
	// sequences the stream removed (limits, purge, delete) before the first
	// one it still holds, whatever their subjects. They are reported, not
	// waited for, so a cursor behind them moves on.
	Skipped uint64
	// Next is where the following read resumes: every message matching the
	// filter in [From, Next) is in Records. It is past the last record, or
	// further when the reader knows nothing matching follows (the tail's
	// ring), so an idle cursor can keep up with the head.
	Next uint64
	// CaughtUp promises that no matching message followed the last record
	// (or From) when the page was read; false means read again. Near the
	// head "when" is as of the tail (see Tail): a message stored but not yet
	// received by it is not in the page, and its notification follows.
	CaughtUp bool
	// LastSeq is the stream's last sequence as far as the reader knows.
	LastSeq uint64
}

// StreamState is what the server says of the journal stream.
type StreamState struct {
	// Created changes when the stream is deleted and created again, which
	// restarts its sequences: cursors taken before mean nothing after.
	Created     time.Time
	FirstSeq    uint64
	LastSeq     uint64
	Messages    uint64
	AllowDirect bool
	// Deleted counts the messages removed from inside the stream (an
	// operator's delete, a purge by subject); the reader asks which they
	// are when it changes.
	Deleted uint64
}

// Stats counts the reader's work since it was created.
type Stats struct {
	// ServerRequests counts every request sent to the server: page
	// fetches, probes, stream info, and without allow_direct the creation
	// and deletion of the consumers pages are pulled from.
	ServerRequests uint64
	// Fetches counts page reads that went to the server.
	Fetches uint64
	// Probes counts the one-message reads that measure how much of a gap
	// below a page the stream removed.
	Probes uint64
	// InfoRequests counts stream info requests.
	InfoRequests uint64
	// MessagesFetched counts messages received from the server.
	MessagesFetched uint64
	// CacheHits counts records served from memory: the tail's ring, cached
	// runs, or a fetch another read made.
	CacheHits uint64
	// CoalescedReads counts reads that waited for an identical fetch in
	// flight instead of making their own.
	CoalescedReads uint64
	// TailMessages counts messages the tail received.
	TailMessages uint64
}

type counters struct {
	requests, fetches, probes, infos, fetched, hits, coalesced, tail atomic.Uint64
}

// Option configures a Reader.
type Option func(*options)

type options struct {
	log        *slog.Logger
	cacheBytes int64
	domain     string
	apiPrefix  string
	timeout    time.Duration
}

// WithLogger sets where the reader reports what an operator should know
// (a stream without allow_direct, a re-created stream, tail errors).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithCacheBytes bounds the memory holding messages (default 64 MiB): half
// for the tail's ring, half for fetched runs. Zero keeps nothing.
func WithCacheBytes(n int64) Option {
	return func(o *options) { o.cacheBytes = max(n, 0) }
}

// WithDomain reads a stream in another JetStream domain.
func WithDomain(domain string) Option {
	return func(o *options) { o.domain = domain }
}

// WithAPIPrefix reads through an imported JetStream API prefix.
func WithAPIPrefix(prefix string) Option {
	return func(o *options) { o.apiPrefix = prefix }
}

// WithRequestTimeout bounds each server request made without a context
// deadline (default 5 s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// Reader reads the journal stream for many registrations at once. It is
// safe for concurrent use.
type Reader struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  string
	log     *slog.Logger
	timeout time.Duration
	direct  *directGetter
	pull    *pullGetter
	slow    *msgGetter
	stats   counters
	lastSeq atomic.Uint64 // the highest sequence known to exist

	// base ends with Close and with it every fetch in flight.
	base   context.Context
	cancel context.CancelFunc

	infoMu sync.Mutex // one first stream info at a time
	mu     sync.Mutex // guards the fields below
	state  StreamState
	known  bool
	gen    uint64 // changes when the stream is re-created
	// confirmed is the creation time of the stream the caller's sequences
	// are taken against: the first one the reader learns, then whatever
	// ConfirmStream accepts. Read serves nothing while state.Created
	// differs from it.
	confirmed time.Time
	runs      *runCache
	// flights are the fetches in progress, so identical reads share one.
	flights    map[flightKey]*flight
	flightsWG  sync.WaitGroup
	warnedSlow bool
	closed     bool

	ring ring
	// removed is what the stream no longer holds, as of the last Info.
	removed   atomic.Pointer[removedSet]
	tailing   atomic.Bool
	tailReset chan struct{}
	// doubts counts the signs that the stream may have changed (a consumer
	// error, a re-creation seen): a read that overlaps one is not trusted.
	doubts atomic.Uint64
}

type flightKey struct {
	filter string
	from   uint64
}

// flight is one fetch from the server that any number of reads wait on.
type flight struct {
	done     chan struct{}
	run      *run // lo = from; may hold no records
	caughtUp bool
	err      error
}

// NewReader returns a reader of stream over nc. It makes no request: the
// stream is looked up by the first read.
func NewReader(nc *nats.Conn, stream string, opts ...Option) (*Reader, error) {
	if nc == nil {
		return nil, errors.New("journal: NewReader needs a NATS connection")
	}
	if err := validateStreamName(stream); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler), cacheBytes: DefaultCacheBytes, timeout: defaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	js, prefix, err := newJetStream(nc, o)
	if err != nil {
		return nil, err
	}
	r := &Reader{
		nc:        nc,
		js:        js,
		stream:    stream,
		log:       o.log,
		timeout:   o.timeout,
		runs:      newRunCache(o.cacheBytes / 2),
		flights:   make(map[flightKey]*flight),
		tailReset: make(chan struct{}, 1),
	}
	r.ring.budget = o.cacheBytes - o.cacheBytes/2
	r.ring.lo = 1 // empty: covers nothing
	r.slow = &msgGetter{nc: nc, stream: stream, subject: prefix + "STREAM.MSG.GET." + stream, stats: &r.stats}
	if r.direct, err = newDirectGetter(nc, prefix, stream, &r.stats); err != nil {
		return nil, err
	}
	r.pull = newPullGetter(nc, js, prefix, stream, &r.stats, r.slow, r.distrust)
	r.base, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

func newJetStream(nc *nats.Conn, o options) (jetstream.JetStream, string, error) {
	switch {
	case o.domain != "" && o.apiPrefix != "":
		return nil, "", errors.New("journal: set a JetStream domain or an API prefix, not both")
	case o.domain != "":
		js, err := jetstream.NewWithDomain(nc, o.domain)
		return js, "$JS." + o.domain + ".API.", err
	case o.apiPrefix != "":
		prefix := o.apiPrefix
		if prefix[len(prefix)-1] != '.' {
			prefix += "."
		}
		js, err := jetstream.NewWithAPIPrefix(nc, prefix)
		return js, prefix, err
	default:
		js, err := jetstream.New(nc)
		return js, jetstream.DefaultAPIPrefix, err
	}
}

// Close stops the fetches in flight and releases the reply subscription.
// It does not stop Tail; cancel its context.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.flightsWG.Wait()
	r.pull.close()
	return r.direct.close()
}

// Stats returns the reader's counters.
func (r *Reader) Stats() Stats {
	s := &r.stats
	return Stats{
		ServerRequests:  s.requests.Load(),
		Fetches:         s.fetches.Load(),
		Probes:          s.probes.Load(),
		InfoRequests:    s.infos.Load(),
		MessagesFetched: s.fetched.Load(),
		CacheHits:       s.hits.Load(),
		CoalescedReads:  s.coalesced.Load(),
		TailMessages:    s.tail.Load(),
	}
}

// Read returns up to limit messages matching filter with sequence >= from.
//
// The answer comes from the first source that knows each position: the
// tail's ring, runs fetched earlier for the same filter, or one batched
// fetch from the server shared by every identical read in flight. A page
// may hold fewer than limit records without being caught up; only CaughtUp
// says nothing more is there.
//
// After the stream was deleted and created again, Read returns a
// *RecreatedError (errors.Is ErrStreamRecreated) and serves no record, from
// memory or the server, until ConfirmStream accepts the new stream: a
// sequence the caller took against the old stream names another message
// now. A read overlapped by a sign that the stream changed (the tail's
// consumer reset or failed) is discarded and made again once the stream's
// identity is checked.
func (r *Reader) Read(ctx context.Context, filter string, from uint64, limit int) (Page, error) {
	if err := validateFilter(filter); err != nil {
		return Page{}, err
	}
	if limit <= 0 {
		return Page{}, fmt.Errorf("journal: read of %s asks for %d messages; want at least 1", filter, limit)
	}
	for range 3 {
		doubts := r.doubts.Load()
		pg, err := r.read(ctx, filter, from, limit)
		if err != nil || r.doubts.Load() == doubts {
			return pg, err
		}
	}
	return Page{}, errUnsettled
}

func (r *Reader) read(ctx context.Context, filter string, from uint64, limit int) (Page, error) {
	st, err := r.current(ctx)
	if err != nil {
		return Page{}, err
	}
	if err := r.confirmedAgainst(st); err != nil {
		return Page{}, err
	}
	from = max(from, 1)
	pg := Page{From: max(from, st.FirstSeq)}
	pg.Skipped = pg.From - from
	pg.Next = pg.From
	for len(pg.Records) < limit {
		more, err := r.step(ctx, filter, &pg, limit)
		if err != nil {
			if len(pg.Records) == 0 {
				return Page{}, err
			}
			// Keep what was read; the next read resumes at Next.
			pg.CaughtUp = false
			break
		}
		if !more {
			break
		}
	}
	pg.LastSeq = max(r.lastSeq.Load(), pg.Next-1)
	return pg, nil
}

// step extends pg at pg.Next from one source and reports whether another
// source may add to it. Every step either ends the page or moves Next
// forward, so Read terminates.
func (r *Reader) step(ctx context.Context, filter string, pg *Page, limit int) (bool, error) {
	p, need := pg.Next, limit-len(pg.Records)
	if rr, ok := r.ring.read(filter, p, need); ok {
		r.stats.hits.Add(uint64(len(rr.recs)))
		pg.Records = append(pg.Records, rr.recs...)
		pg.Next, pg.CaughtUp = rr.next, rr.caughtUp
		return !rr.caughtUp && len(rr.recs) < need, nil
	}
	cached, f, joined, err := r.lookup(filter, p, need)
	if err != nil {
		return false, err
	}
	if cached != nil {
		r.stats.hits.Add(uint64(take(pg, cached, need)))
		return true, nil
	}
	select {
	case <-ctx.Done():
		return false, fmt.Errorf("journal: reading %s from %d: %w", filter, p, ctx.Err())
	case <-f.done:
	}
	if f.err != nil {
		return false, f.err
	}
	n := take(pg, f.run, need)
	if joined {
		r.stats.hits.Add(uint64(n))
	}
	if f.run != nil && n < len(f.run.recs) {
		return false, nil // the page is full
	}
	pg.CaughtUp = f.caughtUp
	return !f.caughtUp && n > 0, nil
}

// take appends to pg the records of v from pg.Next on, at most need, and
// returns how many. A read that starts at v's start learns from v how much
// the stream removed below it.
func take(pg *Page, v *run, need int) int {
	p := pg.Next
	if len(pg.Records) == 0 && p == pg.From && v.lo == p && v.existsFrom > p {
		pg.Skipped += v.existsFrom - p
		pg.From, pg.Next = v.existsFrom, v.existsFrom
	}
	i := sort.Search(len(v.recs), func(i int) bool { return v.recs[i].Seq >= p })
	j := min(len(v.recs), i+need)
	pg.Records = append(pg.Records, v.recs[i:j]...)
	if j < len(v.recs) {
		pg.Next = v.recs[j-1].Seq + 1
	} else {
		pg.Next = max(pg.Next, v.hi+1)
	}
	return j - i
}

// lookup returns the cached run holding p, or the fetch to wait for and
// whether it was already in flight. The check and the start of a fetch
// happen under one lock, so sixteen reads of one filter at one cursor make
// one request.
func (r *Reader) lookup(filter string, p uint64, need int) (cached *run, f *flight, joined bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, false, ErrClosed
	}
	if v := r.runs.find(filter, p); v != nil {
		return v, nil, false, nil
	}
	key := flightKey{filter: filter, from: p}
	if f := r.flights[key]; f != nil {
		r.stats.coalesced.Add(1)
		return nil, f, true, nil
	}
	f = &flight{done: make(chan struct{})}
	r.flights[key] = f
	var g getter = r.pull
	if r.state.AllowDirect {
		g = r.direct
	}
	r.flightsWG.Add(1)
	go r.fly(key, f, g, max(need, fetchBatch), r.gen)
	return nil, f, false, nil
}

// fly runs one fetch. It is detached from the context of the read that
// started it: the reads waiting on it would otherwise fail with the first
// one's cancellation. Close and the request timeout bound it.
func (r *Reader) fly(key flightKey, f *flight, g getter, n int, gen uint64) {
	defer r.flightsWG.Done()
	ctx, cancel := context.WithTimeout(r.base, r.timeout)
	defer cancel()
	r.stats.fetches.Add(1)
	recs, caughtUp, err := g.fetch(ctx, key.filter, key.from, n)
	v := &run{filter: key.filter, lo: key.from, hi: key.from - 1, recs: recs, existsFrom: key.from}
	if err == nil && len(recs) > 0 {
		v.hi = recs[len(recs)-1].Seq
		r.noteLast(v.hi)
		if recs[0].Seq > key.from {
			v.existsFrom = r.probe(ctx, r.prober(g), key.from, recs[0].Seq)
		}
	}
	r.mu.Lock()
	delete(r.flights, key)
	if errors.Is(err, errNoResponders) {
		// The stream is gone or stopped allowing direct gets: ask again.
		r.known = false
		r.doubts.Add(1)
	}
	if err == nil && len(recs) > 0 && gen == r.gen {
		r.runs.insert(v)
	}
	r.mu.Unlock()
	f.run, f.caughtUp, f.err = v, caughtUp, err
	close(f.done)
}

// prober is the getter that reads one message of any subject for probe:
// a consumer for that would cost more than one message get.
func (r *Reader) prober(g getter) getter {
	if g == getter(r.direct) {
		return g
	}
	return r.slow
}

// probe returns the first sequence in [from, limit] the stream still holds,
// limit being a message a fetch just returned. The sequences below it are
// gone: the stream removed them. A failed probe reports nothing removed,
// which at worst leaves a skip uncounted.
func (r *Reader) probe(ctx context.Context, g getter, from, limit uint64) uint64 {
	r.stats.probes.Add(1)
	recs, _, err := g.fetch(ctx, ">", from, 1)
	switch {
	case err != nil:
		r.log.Debug("journal: probing for removed messages failed", "stream", r.stream, "from", from, "error", err)
		return from
	case len(recs) == 0:
		return limit // removed since the fetch, with everything below it
	default:
		return min(recs[0].Seq, limit)
	}
}

// Info asks the server for the stream's state. A Created that differs
// from the last one seen means the stream was deleted and created again:
// the reader then drops every cached message and restarts its tail.
func (r *Reader) Info(ctx context.Context) (StreamState, error) {
	return r.refresh(ctx)
}

// SeqAtTime returns the first sequence stored at or after t, or the last
// sequence + 1 when every stored message is older.
func (r *Reader) SeqAtTime(ctx context.Context, t time.Time) (uint64, error) {
	// The head is read first: a message stored after it is then at or
	// past the answer, never skipped by it.
	st, err := r.refresh(ctx)
	if err != nil {
		return 0, err
	}
	var g getter = r.slow
	if st.AllowDirect {
		g = r.direct
	}
	ctx, cancel := r.withTimeout(ctx)
	defer cancel()
	seq, found, err := g.atTime(ctx, t)
	if err != nil {
		return 0, err
	}
	if !found {
		return st.LastSeq + 1, nil
	}
	return seq, nil
}

// current returns the stream state, asking the server the first time and
// after a read found the stream unreachable.
func (r *Reader) current(ctx context.Context) (StreamState, error) {
	r.mu.Lock()
	st, known, closed := r.state, r.known, r.closed
	r.mu.Unlock()
	if closed {
		return StreamState{}, ErrClosed
	}
	if known {
		return st, nil
	}
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	r.mu.Lock()
	st, known = r.state, r.known
	r.mu.Unlock()
	if known {
		return st, nil
	}
	return r.refresh(ctx)
}

func (r *Reader) refresh(ctx context.Context) (StreamState, error) {
	ctx, cancel := r.withTimeout(ctx)
	defer cancel()
	s, err := r.streamInfo(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return StreamState{}, &NotFoundError{Stream: r.stream, Server: r.nc.ConnectedUrlRedacted()}
	}
	if err != nil {
		return StreamState{}, fmt.Errorf("journal: stream info for %s: %w", r.stream, err)
	}
	info := s.CachedInfo()
	st := StreamState{
		Created:     info.Created,
		FirstSeq:    info.State.FirstSeq,
		LastSeq:     info.State.LastSeq,
		Messages:    info.State.Msgs,
		AllowDirect: info.Config.AllowDirect,
		Deleted:     uint64(info.State.NumDeleted),
	}
	r.apply(st)
	if err := r.learnRemoved(ctx, s, st); err != nil {
		return st, err
	}
	return st, nil
}

// streamInfo asks for the stream's info, again after infoAttemptWait
// without an answer (see package ask): an info request sent while the
// stream elected a leader held every read for seconds after the new
// leader was already serving.
func (r *Reader) streamInfo(ctx context.Context) (jetstream.Stream, error) {
	lost := func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
	}
	return ask.Again(ctx, infoAttempts, infoAttemptWait, lost, func(ctx context.Context) (jetstream.Stream, error) {
		r.stats.requests.Add(1)
		r.stats.infos.Add(1)
		return r.js.Stream(ctx, r.stream)
	})
}

const (
	infoAttempts    = 5
	infoAttemptWait = time.Second
)

// apply records a fresh stream state and, when the stream was re-created,
// forgets every message held for the old one.
func (r *Reader) apply(st StreamState) {
	r.mu.Lock()
	if r.confirmed.IsZero() {
		// The first stream the reader sees is the one its caller means.
		r.confirmed = st.Created
	}
	// The last state seen is compared even when it is no longer trusted
	// (known false after a failed read): a re-creation during an outage
	// counts too.
	recreated := !r.state.Created.IsZero() && !st.Created.Equal(r.state.Created)
	if recreated {
		r.doubts.Add(1)
		r.gen++
		r.runs.clear()
		r.ring.clear()
		r.pull.reset()
		r.lastSeq.Store(st.LastSeq)
		select {
		case r.tailReset <- struct{}{}:
		default:
		}
	}
	warn := !st.AllowDirect && !r.warnedSlow
	r.warnedSlow = !st.AllowDirect
	r.state, r.known = st, true
	r.mu.Unlock()
	r.noteLast(st.LastSeq)
	if recreated {
		r.log.Warn("journal stream was deleted and created again; cached messages dropped",
			"stream", r.stream, "created", st.Created)
	}
	if warn {
		r.log.Warn("journal stream does not allow direct gets; reading pages through short-lived pull consumers (set allow_direct on the stream to read without creating consumers)",
			"stream", r.stream)
	}
}

// ConfirmStream tells the reader that the caller has dealt with the stream
// created at created (for the bridge: parked every registration whose
// cursor was taken against an older one), so Read may serve it. It reports
// whether reads go ahead now; false means the stream the reader knows is
// another one (re-created again since), which must be confirmed in turn.
func (r *Reader) ConfirmStream(created time.Time) bool {
	r.mu.Lock()
	if created.IsZero() || !r.state.Created.Equal(created) {
		r.mu.Unlock()
		return false
	}
	changed := !r.confirmed.Equal(created)
	r.confirmed = created
	r.mu.Unlock()
	if changed {
		r.log.Info("journal stream identity confirmed; reads resume", "stream", r.stream, "created", created)
	}
	return true
}

// confirmedAgainst refuses st when it is not the stream the caller's
// sequences were taken against.
func (r *Reader) confirmedAgainst(st StreamState) error {
	r.mu.Lock()
	was := r.confirmed
	r.mu.Unlock()
	if st.Created.Equal(was) {
		return nil
	}
	return &RecreatedError{Stream: r.stream, Was: was, Now: st.Created}
}

// distrust makes the next read ask the server for the stream's state
// before serving anything, and discards reads in progress: the tail saw a
// sign that the stream may have been deleted (a deleted consumer, missed
// heartbeats, no responders).
func (r *Reader) distrust() {
	r.mu.Lock()
	r.known = false
	r.mu.Unlock()
	r.doubts.Add(1)
}

// noteLast raises the highest sequence known to exist.
func (r *Reader) noteLast(seq uint64) {
	for {
		old := r.lastSeq.Load()
		if seq <= old || r.lastSeq.CompareAndSwap(old, seq) {
			return
		}
	}
}

func (r *Reader) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.timeout)
}
