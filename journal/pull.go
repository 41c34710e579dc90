package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/projection"
)

const (
	// maxPulled bounds the idle consumers a reader keeps for the next page
	// of their filter; each costs the server a little memory until it is
	// deleted or expires.
	maxPulled = 16
	// pullInactive is how long the server keeps a consumer nobody pulls
	// from: the reader's own crash or cut-off connection leaves nothing
	// behind for long.
	pullInactive = time.Minute
)

// errConsumerGone means the consumer a page was pulled from no longer
// exists: it expired, the server restarted, or the stream was deleted.
var errConsumerGone = errors.New("consumer is gone")

// pullGetter reads streams without allow_direct through the server's own
// batching: an ephemeral pull consumer per filter, positioned at the page's
// first sequence, answers a page with one request.
//
// A consumer is kept for the next page of its filter when it is known to
// stand exactly there: its last request ended cleanly (the batch was full
// or the server said no more) and every reply arrived. One whose request
// was abandoned may have moved past messages nobody received, so it is
// deleted, never reused. Pages, skips and re-creations read as with direct
// gets: records come from the stream in order, removed sequences are
// measured by a probe of the message get API, and a vanished consumer
// raises a doubt about the stream (the reader asks for its identity again)
// before a new consumer is made.
type pullGetter struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     string
	prefix     string // <api prefix>CONSUMER.MSG.NEXT.<stream>.
	stats      *counters
	doubt      func() // the stream may have changed: check it before trusting reads
	*msgGetter        // atTime, and the one-message probes

	mu     sync.Mutex
	idle   []*pulled // least recently used first
	closed bool
	drops  sync.WaitGroup // deletions in flight
}

func newPullGetter(nc *nats.Conn, js jetstream.JetStream, apiPrefix, stream string, stats *counters, slow *msgGetter, doubt func()) *pullGetter {
	return &pullGetter{
		nc: nc, js: js, stream: stream, stats: stats, doubt: doubt, msgGetter: slow,
		prefix: apiPrefix + "CONSUMER.MSG.NEXT." + stream + ".",
	}
}

// pulled is one consumer, where it stands, and the subscription its pages
// arrive on. A pulled message keeps its own subject, so the replies of
// different consumers cannot share one wildcard subscription the way
// direct gets do; each consumer's requests run one at a time on its own.
//
// Each request has its own reply subject under the consumer's inbox: the
// server may close a full batch with a status after its last message
// ("409 Batch Completed" when bytes were left), and that status must not
// end the next request.
type pulled struct {
	name   string
	filter string
	next   uint64 // the first sequence its next pull can deliver
	dseq   uint64 // the consumer's last delivery sequence
	inbox  string
	sub    *nats.Subscription
	pulls  uint64 // requests made, naming each one's reply subject

	mu  sync.Mutex
	cur *pull // the request in progress; nil between requests
}

// route hands a reply to the request in progress. The subscription calls
// it from one goroutine. A stored message carries its own subject, a
// status the request's reply subject.
func (c *pulled) route(m *nats.Msg) {
	c.mu.Lock()
	p := c.cur
	c.mu.Unlock()
	if p == nil || (m.Reply == "" && m.Subject != p.reply) || !p.add(m) {
		return
	}
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
	p.finish()
}

// pullRequest is the body of a pull, as the server's JSApiConsumerGetNextRequest reads it.
type pullRequest struct {
	Batch    int  `json:"batch"`
	MaxBytes int  `json:"max_bytes,omitempty"`
	NoWait   bool `json:"no_wait"`
}

func (g *pullGetter) fetch(ctx context.Context, filter string, from uint64, n int) ([]projection.Record, bool, error) {
	recs, caughtUp, err := g.fetchOnce(ctx, filter, from, n)
	if errors.Is(err, errConsumerGone) {
		// Expired, lost with a server restart, or the stream is another
		// one now: the reader checks the stream before it serves this.
		g.doubt()
		recs, caughtUp, err = g.fetchOnce(ctx, filter, from, n)
	}
	if err != nil {
		return nil, false, fmt.Errorf("journal: pulling %s from %d on stream %s: %w", filter, from, g.stream, err)
	}
	return recs, caughtUp, nil
}

func (g *pullGetter) fetchOnce(ctx context.Context, filter string, from uint64, n int) ([]projection.Record, bool, error) {
	c, err := g.take(ctx, filter, from)
	if err != nil {
		return nil, false, err
	}
	r, tooBig, err := g.pull(ctx, c, n)
	if err != nil {
		g.drop(c)
		return nil, false, err
	}
	g.put(c)
	g.stats.fetched.Add(uint64(len(r.recs)))
	if len(r.recs) == 0 && tooBig {
		// The first message alone is larger than a pull may carry.
		return g.msgGetter.fetch(ctx, filter, from, 1)
	}
	return r.recs, r.caughtUp, nil
}

// pull asks c for up to n messages and moves c past what it delivered.
func (g *pullGetter) pull(ctx context.Context, c *pulled, n int) (answerResult, bool, error) {
	body, err := json.Marshal(pullRequest{Batch: n, MaxBytes: maxFetchBytes, NoWait: true})
	if err != nil {
		return answerResult{}, false, err
	}
	c.pulls++
	p := &pull{handoff: newHandoff(min(n, 64)), stream: g.stream, want: n, dseq: c.dseq,
		reply: c.inbox + "." + strconv.FormatUint(c.pulls, 36)}
	c.mu.Lock()
	c.cur = p
	c.mu.Unlock()
	g.stats.requests.Add(1)
	if err := g.nc.PublishRequest(g.prefix+c.name, p.reply, body); err != nil {
		return answerResult{}, false, err
	}
	r, err := p.wait(ctx)
	if err != nil {
		return answerResult{}, false, err
	}
	if len(r.recs) > 0 {
		c.next, c.dseq = r.recs[len(r.recs)-1].Seq+1, p.dseq
	}
	return r, p.tooBig, nil
}

// take returns the idle consumer standing at from on filter, or a new one.
func (g *pullGetter) take(ctx context.Context, filter string, from uint64) (*pulled, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, ErrClosed
	}
	for i, c := range g.idle {
		if c.filter == filter && c.next == from {
			g.idle = append(g.idle[:i], g.idle[i+1:]...)
			g.mu.Unlock()
			return c, nil
		}
	}
	g.mu.Unlock()
	return g.create(ctx, filter, from)
}

func (g *pullGetter) create(ctx context.Context, filter string, from uint64) (*pulled, error) {
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: pullInactive,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if filter != ">" {
		cfg.FilterSubject = filter
	}
	g.stats.requests.Add(1)
	cons, err := g.js.CreateConsumer(ctx, g.stream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		g.doubt()
	}
	if err != nil {
		return nil, fmt.Errorf("creating a consumer to read from: %w", err)
	}
	c := &pulled{name: cons.CachedInfo().Name, filter: filter, next: from, inbox: g.nc.NewInbox()}
	if c.sub, err = g.nc.Subscribe(c.inbox+".*", c.route); err != nil {
		g.drop(c)
		return nil, fmt.Errorf("subscribing for pulled messages: %w", err)
	}
	return c, nil
}

// put keeps c for the next page of its filter, deleting the least
// recently used consumer when too many are kept.
func (g *pullGetter) put(c *pulled) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		g.drop(c)
		return
	}
	g.idle = append(g.idle, c)
	var old *pulled
	if len(g.idle) > maxPulled {
		old = g.idle[0]
		g.idle = g.idle[1:]
	}
	g.mu.Unlock()
	if old != nil {
		g.drop(old)
	}
}

// drop unsubscribes c and deletes it on the server in the background; a
// deletion that fails leaves it to expire after pullInactive.
func (g *pullGetter) drop(c *pulled) {
	if c.sub != nil {
		_ = c.sub.Unsubscribe()
	}
	g.drops.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
		defer cancel()
		g.stats.requests.Add(1)
		_ = g.js.DeleteConsumer(ctx, g.stream, c.name)
	})
}

// reset forgets the kept consumers without deleting them: the stream they
// read was deleted, and they with it.
func (g *pullGetter) reset() {
	g.mu.Lock()
	idle := g.idle
	g.idle = nil
	g.mu.Unlock()
	for _, c := range idle {
		_ = c.sub.Unsubscribe()
	}
}

// close deletes every kept consumer and waits for the deletions.
func (g *pullGetter) close() {
	g.mu.Lock()
	idle := g.idle
	g.idle, g.closed = nil, true
	g.mu.Unlock()
	for _, c := range idle {
		g.drop(c)
	}
	g.drops.Wait()
}

// pull gathers the replies of one pull request. The consumer numbers its
// deliveries one by one, so a reply lost on the way (a slow consumer)
// fails the fetch instead of leaving a hole the caller would read as "no
// message there".
type pull struct {
	handoff
	stream string
	reply  string
	want   int
	dseq   uint64 // the delivery sequence of the last reply
	tooBig bool   // ended by a message larger than what was left of max_bytes
}

// add takes one reply and reports whether the answer is complete: the
// batch is full, or the server ended the request. The server can still
// deliver to a request after the last message it counted as pending, so
// only its end says that nothing more comes.
func (p *pull) add(m *nats.Msg) bool {
	r := &p.result
	if m.Reply == "" {
		r.caughtUp, p.tooBig, r.err = endOfPull(m)
		return true
	}
	meta, err := m.Metadata()
	if err != nil {
		r.err = fmt.Errorf("reply without consumer metadata: %w", err)
		return true
	}
	if meta.Sequence.Consumer != p.dseq+1 {
		r.err = fmt.Errorf("answer lost messages after delivery %d (next is delivery %d)", p.dseq, meta.Sequence.Consumer)
		return true
	}
	p.dseq = meta.Sequence.Consumer
	rec := projection.Record{Stream: p.stream, Seq: meta.Sequence.Stream, Subject: m.Subject, Time: meta.Timestamp.UTC(), Data: m.Data}
	if len(m.Header) > 0 {
		rec.Header = m.Header
	}
	r.recs = append(r.recs, rec)
	if len(r.recs) == p.want {
		r.caughtUp = meta.NumPending == 0
		return true
	}
	return false
}

// endOfPull reads the status that ends a pull request early.
func endOfPull(m *nats.Msg) (caughtUp, tooBig bool, err error) {
	status, desc := m.Header.Get("Status"), m.Header.Get("Description")
	switch {
	case status == "404":
		return true, false, nil // nothing more matches
	case status == "409" && strings.Contains(desc, "MaxBytes"):
		return false, true, nil
	case status == "409" && strings.Contains(desc, "Batch Completed"):
		return false, false, nil
	case status == "503", status == "409" && (strings.Contains(desc, "Deleted") || strings.Contains(desc, "Leadership")):
		return false, false, errConsumerGone
	default:
		return false, false, fmt.Errorf("server answered status %s %q", status, desc)
	}
}
