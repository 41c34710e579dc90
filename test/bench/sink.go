package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sink is the receiver every scenario delivers to: HTTP/1.1 with
// keep-alive, answering 204 at once, so what is measured is the sender —
// or, with setDelay, after a while, as a slow receiver does, so what is
// measured is how many such receivers the senders keep busy at once; with
// setRefuse, 503 to the POSTs it names, as a receiver failing some
// messages does.
//
// Paths: /r/<i> is registration i of the current run; /bare takes the
// baselines' POSTs and only counts them (and the events of a batch),
// answering at once; /bare/delayed the same after the delay, as a
// registration's POSTs are answered. A CloudEvents batch is read as a JSON
// array on every path, so a baseline POSTing batches costs the sink what
// the bridge's batches do. A delivery is identified by the
// registration and the stream sequence at the end of its webhook-id
// (<stream>-<seq>); its first arrival time is recorded, and with
// run.latency its publish→arrival time, read from the payload's leading
// timestamp (see stamped).
type sink struct {
	srv   *http.Server
	ln    net.Listener
	url   string
	cur   atomic.Pointer[run]
	bare  atomic.Int64
	delay atomic.Int64 // nanoseconds each /r/ and /bare/delayed answer waits
	bufs  sync.Pool

	// bareEvents counts the events of the baselines' batches.
	bareEvents atomic.Int64
	// refuse, when set, names the registrations' POSTs answered 503
	// (without Retry-After) and not recorded; refused counts them.
	refuse  atomic.Pointer[func(*http.Request) bool]
	refused atomic.Int64
}

// run is one measurement: regs registrations × msgs consecutive sequences
// from firstSeq.
type run struct {
	regs, msgs int
	firstSeq   uint64
	latency    bool

	// passes, when set, names the deliveries the run expects: message m
	// (from 0) is sent to registration reg only when passes(reg, m), as
	// a filter chooses; wanted counts them. An arrival it does not name
	// is counted in unwanted and nowhere else.
	passes func(reg, m int) bool
	wanted int64

	arrived []atomic.Int64 // first arrival, unix nanos; 0 = not yet
	lat     []atomic.Int64 // publish→arrival, nanos (with latency)
	latest  []atomic.Int64 // per registration: its latest POST, unix nanos

	distinct  atomic.Int64
	total     atomic.Int64 // every 2xx-worthy POST, repeats included
	stray     atomic.Int64 // deliveries outside the run's range
	unwanted  atomic.Int64 // deliveries in range that passes does not name
	singles   atomic.Int64 // POSTs carrying one event
	batches   atomic.Int64 // POSTs carrying a CloudEvents batch
	last      atomic.Int64 // time the last distinct delivery arrived
	done      chan struct{}
	closeOnce sync.Once
}

func newRun(regs, msgs int, firstSeq uint64, latency bool) *run {
	r := &run{regs: regs, msgs: msgs, firstSeq: firstSeq, latency: latency,
		arrived: make([]atomic.Int64, regs*msgs), latest: make([]atomic.Int64, regs), done: make(chan struct{})}
	if latency {
		r.lat = make([]atomic.Int64, regs*msgs)
	}
	return r
}

// newFilteredRun is newRun of the deliveries passes names.
func newFilteredRun(regs, msgs int, firstSeq uint64, passes func(reg, m int) bool) *run {
	r := newRun(regs, msgs, firstSeq, false)
	r.passes = passes
	for reg := range regs {
		for m := range msgs {
			if passes(reg, m) {
				r.wanted++
			}
		}
	}
	return r
}

func (r *run) want() int64 {
	if r.passes != nil {
		return r.wanted
	}
	return int64(r.regs * r.msgs)
}

// expects says whether registration reg is to be sent message m.
func (r *run) expects(reg, m int) bool { return r.passes == nil || r.passes(reg, m) }

// record notes one event for registration reg at stream sequence seq.
func (r *run) record(reg int, seq uint64, now time.Time, sent int64) {
	r.total.Add(1)
	ns := now.UnixNano()
	if reg >= 0 && reg < r.regs {
		r.latest[reg].Store(ns)
	}
	if reg < 0 || reg >= r.regs || seq < r.firstSeq || seq >= r.firstSeq+uint64(r.msgs) {
		r.stray.Add(1)
		return
	}
	m := int(seq - r.firstSeq)
	if !r.expects(reg, m) {
		r.unwanted.Add(1)
		return
	}
	i := reg*r.msgs + m
	if !r.arrived[i].CompareAndSwap(0, ns) {
		return
	}
	if r.latency && sent > 0 {
		r.lat[i].Store(ns - sent)
	}
	if r.distinct.Add(1) == r.want() {
		r.last.Store(ns)
		r.closeOnce.Do(func() { close(r.done) })
	}
}

// extras says how many deliveries arrived more than once (at-least-once
// allows it; a clean run should have none), how many fell outside the
// run and, in a filtered run, how many a filter should have passed over
// (there should be none of either).
func (r *run) extras() string {
	stray, unwanted := r.stray.Load(), r.unwanted.Load()
	s := fmt.Sprintf("%d repeats", r.total.Load()-r.distinct.Load()-stray-unwanted)
	if stray > 0 {
		s += fmt.Sprintf(", %d strays", stray)
	}
	if r.passes != nil {
		s += fmt.Sprintf(", %d the filters should have passed over", unwanted)
	}
	return s
}

// latencies returns every recorded publish→arrival time.
func (r *run) latencies() []time.Duration {
	out := make([]time.Duration, 0, len(r.lat))
	for i := range r.lat {
		if v := r.lat[i].Load(); v > 0 {
			out = append(out, time.Duration(v))
		}
	}
	return out
}

func newSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{ln: ln, url: "http://" + ln.Addr().String()}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) close() { _ = s.srv.Close() }

// listener is a loopback server of the bench's own beside the sink's
// port: a scenario's receiver with TLS, or one inspecting each POST before
// the sink counts it, or a token endpoint or span collector the bridge
// calls.
type listener struct {
	srv   *http.Server
	url   string
	conns atomic.Int64 // connections accepted: TLS handshakes, over TLS
}

// listen serves h on a new loopback port, over TLS when cfg is not nil.
// HTTP/1.1 only, as the sink's own port is, so a TLS receiver differs from
// it by TLS alone and not by HTTP/2 as well.
func listen(h http.Handler, cfg *tls.Config) (*listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &listener{url: "http://" + ln.Addr().String()}
	l.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		Protocols: new(http.Protocols),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				l.conns.Add(1)
			}
		}}
	l.srv.Protocols.SetHTTP1(true)
	if cfg == nil {
		go func() { _ = l.srv.Serve(ln) }()
		return l, nil
	}
	l.url = "https://" + ln.Addr().String()
	l.srv.TLSConfig = cfg
	go func() { _ = l.srv.ServeTLS(ln, "", "") }()
	return l, nil
}

func (l *listener) close() { _ = l.srv.Close() }

// start makes r the current run; deliveries before it are dropped.
func (s *sink) start(r *run) { s.cur.Store(r) }

// setDelay makes every answer to a registration's POST, and to a
// baseline's on /bare/delayed, wait d (0: answer at once); the baselines'
// /bare POSTs are always answered at once.
func (s *sink) setDelay(d time.Duration) { s.delay.Store(int64(d)) }

// setRefuse makes the sink answer 503, with no Retry-After, to every POST
// to a registration that refuse names; nil refuses none.
func (s *sink) setRefuse(refuse func(*http.Request) bool) {
	if refuse == nil {
		s.refuse.Store(nil)
		return
	}
	s.refuse.Store(&refuse)
}

// delayedBarePath is where a baseline's POSTs are answered as a
// registration's are, after the sink's delay.
const delayedBarePath = "/bare/delayed"

// latestAt is when registration reg of r was last POSTed to, in unix
// nanoseconds; 0 when never.
func (r *run) latestAt(reg int) int64 { return r.latest[reg].Load() }

func (s *sink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, _ = buf.ReadFrom(req.Body)
	defer s.bufs.Put(buf)
	path := req.URL.Path
	if d := time.Duration(s.delay.Load()); d > 0 && path != "/bare" {
		time.Sleep(d)
	}
	if refuse := s.refuse.Load(); refuse != nil && strings.HasPrefix(path, "/r/") && (*refuse)(req) {
		s.refused.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)

	var evs []batchEvent
	batch := strings.HasPrefix(req.Header.Get("Content-Type"), "application/cloudevents-batch+json")
	if batch && json.Unmarshal(buf.Bytes(), &evs) != nil {
		evs = nil
	}
	if path == "/bare" || path == delayedBarePath {
		s.bare.Add(1)
		s.bareEvents.Add(int64(len(evs)))
		return
	}
	r := s.cur.Load()
	idx, ok := strings.CutPrefix(path, "/r/")
	if r == nil || !ok {
		return
	}
	reg, err := strconv.Atoi(idx)
	if err != nil {
		return
	}
	if batch {
		r.batches.Add(1)
		for _, ev := range evs {
			r.record(reg, seqOf(ev.ID), now, 0)
		}
		return
	}
	r.singles.Add(1)
	var sent int64
	if r.latency {
		sent = sentAt(buf.Bytes())
	}
	r.record(reg, seqOf(req.Header.Get("Webhook-Id")), now, sent)
}

// batchEvent is what the sink reads of each event of a CloudEvents batch.
type batchEvent struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// seqOf is the stream sequence at the end of a webhook-id
// "<stream>-<seq>"; 0 when there is none.
func seqOf(id string) uint64 {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// sentAt reads the unix-nanosecond stamp a stamped payload starts with.
func sentAt(body []byte) int64 {
	end := bytes.IndexByte(body, ' ')
	if end <= 0 {
		return 0
	}
	n, err := strconv.ParseInt(string(body[:end]), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
