package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetstream-bridge/bridge/projection"
)

// getter is one way of reading messages from the stream without a consumer.
type getter interface {
	// fetch returns up to n messages matching filter with sequence >= from,
	// ascending. caughtUp reports that the server held no further matching
	// message after the last one returned (or after from) when it answered.
	fetch(ctx context.Context, filter string, from uint64, n int) (recs []projection.Record, caughtUp bool, err error)
	// atTime returns the first sequence stored at or after t; found is false
	// when every stored message is older.
	atTime(ctx context.Context, t time.Time) (seq uint64, found bool, err error)
}

// getRequest is the body of a direct get or message get request, as the
// server's JSApiMsgGetRequest reads it.
type getRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextBy    string     `json:"next_by_subj,omitempty"`
	Batch     int        `json:"batch,omitempty"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// errNoResponders means nothing answers on the stream's direct get subject:
// the stream is gone or no longer allows direct gets.
var errNoResponders = errors.New("no responders")

// numPendingHeader is set by the server on batched answers.
const numPendingHeader = "Nats-Num-Pending"

// directGetter reads with batched direct gets: one request, many replies on
// one reply subject, closed by an end-of-batch status. All requests of a
// Reader share one wildcard subscription, so a page costs one publish and
// no subscription churn.
//
// Replies become records on the subscription's goroutine, and a request
// is handed its whole answer at once: a page of n messages wakes the
// waiting reader once, not n times. Those per-message hand-offs competed
// with a drain's deliveries for the cores.
type directGetter struct {
	nc      *nats.Conn
	stream  string
	subject string // <api prefix>DIRECT.GET.<stream>
	prefix  string // reply subjects are prefix + token
	stats   *counters

	sub     *nats.Subscription
	mu      sync.Mutex
	next    uint64
	pending map[string]*answer
}

func newDirectGetter(nc *nats.Conn, apiPrefix, stream string, stats *counters) (*directGetter, error) {
	d := &directGetter{
		nc:      nc,
		stream:  stream,
		subject: apiPrefix + "DIRECT.GET." + stream,
		prefix:  nc.NewInbox() + ".",
		stats:   stats,
		pending: make(map[string]*answer),
	}
	sub, err := nc.Subscribe(d.prefix+"*", d.route)
	if err != nil {
		return nil, fmt.Errorf("journal: subscribing for direct get replies: %w", err)
	}
	d.sub = sub
	return d, nil
}

// close releases the reply subscription; a closed connection already did.
func (d *directGetter) close() error {
	err := d.sub.Unsubscribe()
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
		return nil
	}
	return err
}

// route adds a reply to the answer it belongs to and, when that answer is
// complete, forgets the request and hands the answer over. Replies to
// abandoned or completed requests are dropped. The subscription calls
// route from one goroutine, so an answer is only ever touched by one.
func (d *directGetter) route(m *nats.Msg) {
	token := m.Subject[len(d.prefix):]
	d.mu.Lock()
	a := d.pending[token]
	d.mu.Unlock()
	if a == nil || !a.add(d.stream, m) {
		return
	}
	d.mu.Lock()
	delete(d.pending, token)
	d.mu.Unlock()
	a.finish()
}

// request publishes body and returns the answer its replies are gathered
// into, and the function that forgets it.
func (d *directGetter) request(body []byte, capacity int) (*answer, func(), error) {
	a := &answer{handoff: newHandoff(capacity)}
	d.mu.Lock()
	d.next++
	token := strconv.FormatUint(d.next, 36)
	d.pending[token] = a
	d.mu.Unlock()
	forget := func() {
		d.mu.Lock()
		delete(d.pending, token)
		d.mu.Unlock()
	}
	d.stats.requests.Add(1)
	if err := d.nc.PublishRequest(d.subject, d.prefix+token, body); err != nil {
		forget()
		return nil, nil, err
	}
	return a, forget, nil
}

func (d *directGetter) fetch(ctx context.Context, filter string, from uint64, n int) ([]projection.Record, bool, error) {
	body, err := json.Marshal(getRequest{Seq: from, NextBy: filter, Batch: n, MaxBytes: maxFetchBytes})
	if err != nil {
		return nil, false, err
	}
	a, forget, err := d.request(body, min(n, 64))
	if err != nil {
		return nil, false, fmt.Errorf("journal: direct get on stream %s from %d: %w", d.stream, from, err)
	}
	defer forget()
	r, err := a.wait(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("journal: direct get on stream %s from %d: %w", d.stream, from, err)
	}
	d.stats.fetched.Add(uint64(len(r.recs)))
	return r.recs, r.caughtUp, nil
}

// answer is one batched answer being gathered. Each message names the
// sequence of the one before it in the batch, and the end of batch the
// last one, so a reply lost on the way (a slow consumer) fails the fetch
// instead of leaving a hole the caller would read as "no message there".
type answer struct {
	handoff
	prev uint64
}

// handoff carries a gathered answer to the reader waiting for it, once.
type handoff struct {
	result answerResult
	done   chan answerResult // room for the one result
}

func newHandoff(capacity int) handoff {
	return handoff{result: answerResult{recs: make([]projection.Record, 0, capacity)}, done: make(chan answerResult, 1)}
}

func (h *handoff) finish() { h.done <- h.result }

// answerResult is what a completed answer hands the waiting reader.
type answerResult struct {
	recs     []projection.Record
	caughtUp bool
	err      error
}

// wait returns the answer once complete, or the context's error.
func (h *handoff) wait(ctx context.Context) (answerResult, error) {
	select {
	case <-ctx.Done():
		return answerResult{}, ctx.Err()
	case r := <-h.done:
		return r, r.err
	}
}

// add takes one reply and reports whether the answer is complete.
func (a *answer) add(stream string, m *nats.Msg) bool {
	r := &a.result
	if !isData(m) {
		r.caughtUp, r.err = endOfBatch(m)
		if r.err == nil && len(r.recs) > 0 && m.Header.Get(nats.JSLastSequence) != strconv.FormatUint(a.prev, 10) {
			r.err = fmt.Errorf("answer lost messages after %d (end of batch names %s)", a.prev, m.Header.Get(nats.JSLastSequence))
		}
		return true
	}
	// A server older than 2.11 ignores batch and answers one message
	// without the batch headers and no end of batch.
	single := m.Header.Get(numPendingHeader) == ""
	if !single && lastValue(m.Header, nats.JSLastSequence) != strconv.FormatUint(a.prev, 10) {
		r.err = fmt.Errorf("answer lost messages after %d (next names %s)", a.prev, lastValue(m.Header, nats.JSLastSequence))
		return true
	}
	rec, err := directRecord(stream, m, !single)
	if err != nil {
		r.err = err
		return true
	}
	r.recs = append(r.recs, rec)
	a.prev = rec.Seq
	return single
}

func (d *directGetter) atTime(ctx context.Context, t time.Time) (uint64, bool, error) {
	t = t.UTC()
	body, err := json.Marshal(getRequest{StartTime: &t, NextBy: ">"})
	if err != nil {
		return 0, false, err
	}
	a, forget, err := d.request(body, 1)
	if err != nil {
		return 0, false, fmt.Errorf("journal: direct get on stream %s at time %s: %w", d.stream, t.Format(time.RFC3339Nano), err)
	}
	defer forget()
	r, err := a.wait(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("journal: direct get on stream %s at time %s: %w", d.stream, t.Format(time.RFC3339Nano), err)
	}
	if len(r.recs) == 0 {
		return 0, false, nil
	}
	return r.recs[0].Seq, true, nil
}

// isData tells a stored message from a status reply. A published message may
// carry its own "Status" header, so the test is the sequence header the
// server adds to every message it returns.
func isData(m *nats.Msg) bool {
	_, ok := m.Header[nats.JSSequence]
	return ok
}

// endOfBatch reads a status reply: 204 closes a batch and says how many
// matching messages remain, 404 means none matched at all.
func endOfBatch(m *nats.Msg) (caughtUp bool, err error) {
	switch status := m.Header.Get("Status"); status {
	case "204":
		np, err := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
		if err != nil {
			// Without the count we cannot promise the caller is caught up.
			return false, nil
		}
		return np == 0, nil
	case "404":
		return true, nil
	case "503":
		return false, errNoResponders
	default:
		return false, fmt.Errorf("server answered status %s %q", status, m.Header.Get("Description"))
	}
}

// directRecord turns a direct get reply into a Record, removing the headers
// the server added (the last value of each) so Header holds the message's
// headers as published.
func directRecord(stream string, m *nats.Msg, batch bool) (projection.Record, error) {
	h := m.Header
	seqText := lastValue(h, nats.JSSequence)
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return projection.Record{}, fmt.Errorf("journal: direct get on stream %s: bad %s header %q", stream, nats.JSSequence, seqText)
	}
	ts, err := time.Parse(time.RFC3339Nano, lastValue(h, nats.JSTimeStamp))
	if err != nil {
		return projection.Record{}, fmt.Errorf("journal: direct get on stream %s: message %d has a bad %s header", stream, seq, nats.JSTimeStamp)
	}
	rec := projection.Record{Stream: stream, Seq: seq, Subject: lastValue(h, nats.JSSubject), Time: ts, Data: m.Data}
	// The server appends its headers after the message's own, so the last
	// value of each is the server's; an earlier one was published with the
	// message (a republished message carries its origin's Nats-Sequence).
	dropLast(h, nats.JSStream, nats.JSSubject, nats.JSSequence, nats.JSTimeStamp)
	if batch {
		dropLast(h, numPendingHeader, nats.JSLastSequence)
	}
	if len(h) > 0 {
		rec.Header = h
	}
	return rec, nil
}

func lastValue(h nats.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func dropLast(h nats.Header, keys ...string) {
	for _, k := range keys {
		switch v := h[k]; len(v) {
		case 0:
		case 1:
			delete(h, k)
		default:
			h[k] = v[:len(v)-1]
		}
	}
}

// msgGetter reads through $JS.API.STREAM.MSG.GET, one message per request.
// Too slow for pages, it serves what needs one message of a stream without
// allow_direct: a time lookup, a probe for removed messages, a message
// larger than a pull may carry. It creates no consumer and answers from
// the stream leader.
type msgGetter struct {
	nc      *nats.Conn
	stream  string
	subject string // <api prefix>STREAM.MSG.GET.<stream>
	stats   *counters
}

type msgGetResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Message *struct {
		Subject string    `json:"subject"`
		Seq     uint64    `json:"seq"`
		Header  []byte    `json:"hdrs"`
		Data    []byte    `json:"data"`
		Time    time.Time `json:"time"`
	} `json:"message"`
}

// errCodeNoMessage is the server's JSNoMessageFoundErr.
const errCodeNoMessage = 10037

func (g *msgGetter) fetch(ctx context.Context, filter string, from uint64, n int) ([]projection.Record, bool, error) {
	var recs []projection.Record
	for len(recs) < n {
		rec, found, err := g.get(ctx, getRequest{Seq: from, NextBy: filter})
		if err != nil {
			return nil, false, fmt.Errorf("journal: message get on stream %s from %d: %w", g.stream, from, err)
		}
		if !found {
			return recs, true, nil
		}
		recs = append(recs, rec)
		from = rec.Seq + 1
	}
	return recs, false, nil
}

func (g *msgGetter) atTime(ctx context.Context, t time.Time) (uint64, bool, error) {
	t = t.UTC()
	rec, found, err := g.get(ctx, getRequest{StartTime: &t, NextBy: ">"})
	if err != nil {
		return 0, false, fmt.Errorf("journal: message get on stream %s at time %s: %w", g.stream, t.Format(time.RFC3339Nano), err)
	}
	return rec.Seq, found, nil
}

func (g *msgGetter) get(ctx context.Context, req getRequest) (projection.Record, bool, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return projection.Record{}, false, err
	}
	g.stats.requests.Add(1)
	reply, err := g.nc.RequestWithContext(ctx, g.subject, body)
	if err != nil {
		return projection.Record{}, false, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return projection.Record{}, false, fmt.Errorf("decoding answer: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == errCodeNoMessage {
			return projection.Record{}, false, nil
		}
		return projection.Record{}, false, fmt.Errorf("server error %d (%d): %s", resp.Error.Code, resp.Error.ErrCode, resp.Error.Description)
	}
	m := resp.Message
	if m == nil {
		return projection.Record{}, false, errors.New("answer holds neither a message nor an error")
	}
	rec := projection.Record{Stream: g.stream, Seq: m.Seq, Subject: m.Subject, Time: m.Time, Data: m.Data}
	if len(m.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return projection.Record{}, false, fmt.Errorf("message %d has malformed headers: %w", m.Seq, err)
		}
		if len(h) > 0 {
			rec.Header = h
		}
	}
	g.stats.fetched.Add(1)
	return rec, true, nil
}

// Stored reads message seq from the stream's leader, past every cache of
// this reader: found is false once the stream no longer holds it
// (deleted, purged, removed by its limits), however recently a cache saw
// it. For what must not act on a removed message at all, such as a resend
// (CONTRACT §5: the bridge's memory does not outlive the stream).
func (r *Reader) Stored(ctx context.Context, seq uint64) (rec projection.Record, found bool, err error) {
	rec, found, err = r.slow.get(ctx, getRequest{Seq: seq})
	if err != nil {
		return projection.Record{}, false, fmt.Errorf("journal: message get on stream %s at %d: %w", r.stream, seq, err)
	}
	return rec, found && rec.Seq == seq, nil
}
