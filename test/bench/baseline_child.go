package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/projection"
	"github.com/jetstream-bridge/bridge/projection/cloudevents"
	"github.com/jetstream-bridge/bridge/webhook"
)

// childArg, as the first argument, runs the bench binary as a baseline
// process instead of the benchmark:
//
//	bench baseline post -url URL -n N -workers W -size BYTES [-stream NAME -subject SUBJECT [-batch EVENTS]] [-header "Name: value"]...
//	bench baseline consumer -nats URL -stream NAME -subject FILTER -url URL
//
// post times n POSTs and reports once; with -stream and -subject each POST
// carries the headers the bridge sends with a message of that stream and
// subject (wireHeaders), without them a Content-Type only, and each
// -header besides; with -batch too, each POST is the CloudEvents batch
// the bridge sends for that many consecutive messages of -size bytes
// (wireBatch). consumer
// reports {"ready":true}
// once its ordered consumer exists, POSTs every new message until its
// stdin closes, then reports. Reports are JSON lines on stdout
// (childReport); complaints go to stderr.
const childArg = "baseline"

func childMain(args []string) int {
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(childReport{Error: err.Error()})
		return 1
	}
	if len(args) == 0 {
		return fail(errors.New("baseline: no mode (post or consumer)"))
	}
	mode := args[0]
	fs := flag.NewFlagSet(childArg+" "+mode, flag.ContinueOnError)
	url := fs.String("url", "", "the sink URL to POST to")
	n := fs.Int("n", 0, "post: timed POSTs")
	workers := fs.Int("workers", 1, "post: goroutines, each sequential on its own connection")
	size := fs.Int("size", kib, "post: body bytes")
	natsURL := fs.String("nats", "", "consumer: nats-server URL")
	streamName := fs.String("stream", "", "consumer: stream; post: the stream whose delivery headers to send")
	subject := fs.String("subject", "", "consumer: subject filter; post: the subject whose delivery headers to send")
	batch := fs.Int("batch", 0, "post: events per POST, as a CloudEvents batch (needs -stream and -subject)")
	extra := make(http.Header)
	fs.Func("header", "post: a header to send besides, as \"Name: value\" (repeatable)", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("header %q is not \"Name: value\"", v)
		}
		extra.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		return nil
	})
	if err := fs.Parse(args[1:]); err != nil {
		return fail(err)
	}
	if *url == "" {
		return fail(errors.New("baseline: -url is required"))
	}

	// Interrupted with the bench (a terminal's ^C reaches the whole
	// process group), the child stops rather than reports half a figure.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := bareClient()
	defer client.CloseIdleConnections()

	var rep childReport
	var err error
	switch mode {
	case "post":
		if *n <= 0 || *workers <= 0 {
			return fail(errors.New("baseline post: -n and -workers must be positive"))
		}
		body := bytes.Repeat([]byte{'x'}, *size)
		h := http.Header{"Content-Type": {"application/octet-stream"}}
		// A sequence of the backlog's width, so the ids are as long.
		switch {
		case *batch > 0:
			if h, body, err = wireBatch(*streamName, *subject, 100_000, *batch, body, time.Now()); err != nil {
				return fail(err)
			}
		case *streamName != "" || *subject != "":
			if h, err = wireHeaders(*streamName, *subject, 100_000, body, time.Now()); err != nil {
				return fail(err)
			}
		}
		for k, v := range extra {
			h[k] = v
		}
		rep, err = postLoop(ctx, client, *url, *n, *workers, body, h)
	case "consumer":
		if *natsURL == "" || *streamName == "" || *subject == "" {
			return fail(errors.New("baseline consumer: -nats, -stream and -subject are required"))
		}
		stdinClosed := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(stdinClosed)
		}()
		rep, err = consumeAndPost(ctx, client, *natsURL, *streamName, *subject, *url, out, stdinClosed)
	default:
		return fail(fmt.Errorf("baseline: unknown mode %q (post or consumer)", mode))
	}
	if err != nil {
		return fail(err)
	}
	if err := out.Encode(rep); err != nil {
		return 1
	}
	return 0
}

// bareClient is the baselines' HTTP client: keep-alive, enough idle
// connections for the fan-out baseline's goroutines, and a timeout so a
// stuck sink fails the baseline instead of hanging the run. Like the
// bridge's, it asks for no compression, so no Accept-Encoding is sent.
func bareClient() *http.Client {
	return &http.Client{
		Timeout: stallAfter,
		Transport: &http.Transport{
			MaxIdleConns:        64,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// wireHeaders are the headers the bridge sends with the message at seq of
// stream, on subject, to a registration with no secret and no
// authentication: the CloudEvents binary-mode attributes of the bridge's
// own projection, then webhook-id, webhook-timestamp and its User-Agent.
// A baseline that sends them POSTs the bytes the bridge does, so its ratio
// is what the bridge adds (the journal, the store, the projection) and not
// what every delivery of such a message carries.
func wireHeaders(stream, subject string, seq uint64, body []byte, at time.Time) (http.Header, error) {
	m, err := wireMessage(cloudevents.New(cloudevents.WithStream(stream)), "binary", stream, subject, seq, body, at)
	if err != nil {
		return nil, err
	}
	return stampWire(m, at), nil
}

// wireBatch is the POST the bridge's batch mode sends for events
// consecutive messages of stream from seq, each of body on subject: the
// body, a JSON array of structured-mode events joined by the bridge's own
// projection, and its headers, as wireHeaders makes them.
func wireBatch(stream, subject string, seq uint64, events int, body []byte, at time.Time) (http.Header, []byte, error) {
	p := cloudevents.New(cloudevents.WithStream(stream))
	msgs := make([]projection.Message, events)
	for i := range msgs {
		m, err := wireMessage(p, "structured", stream, subject, seq+uint64(i), body, at)
		if err != nil {
			return nil, nil, err
		}
		msgs[i] = m
	}
	m, err := p.Batch(msgs)
	if err != nil {
		return nil, nil, fmt.Errorf("baseline: batching %d events: %w", events, err)
	}
	return stampWire(m, at), m.Body, nil
}

// wireMessage is the one POST a message of stream at seq on subject
// projects to, in format.
func wireMessage(p *cloudevents.Projection, format, stream, subject string, seq uint64, body []byte, at time.Time) (projection.Message, error) {
	if stream == "" || subject == "" {
		return projection.Message{}, errors.New("baseline: the bridge's headers need both -stream and -subject")
	}
	rec := projection.Record{Stream: stream, Seq: seq, Subject: subject, Time: at, Data: body}
	res, err := p.Project(projection.Target{ID: "baseline", Format: format}, &rec)
	if err != nil {
		return projection.Message{}, fmt.Errorf("baseline: projecting a message of %s: %w", subject, err)
	}
	if len(res.Messages) != 1 {
		return projection.Message{}, fmt.Errorf("baseline: a message of %s projects to %d POSTs, want 1", subject, len(res.Messages))
	}
	return res.Messages[0], nil
}

// stampWire is m's headers with what the bridge's sender adds to them:
// webhook-id, webhook-timestamp and its User-Agent.
func stampWire(m projection.Message, at time.Time) http.Header {
	h := m.Header // made for this call alone
	h.Set("Webhook-Id", m.ID)
	h.Set("Webhook-Timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("User-Agent", "jetstream-bridge/"+webhook.DefaultVersion)
	return h
}

// selfCPU is this process's CPU so far, read from /proc as the bridge's
// is; 0 where there is no /proc.
func selfCPU() time.Duration {
	d, err := cpuTime(os.Getpid())
	if err != nil {
		return 0
	}
	return d
}

// post sends one POST with header h and reads the answer, as the bridge's
// sender does. h is only read, so one map serves every POST.
func post(ctx context.Context, client *http.Client, url string, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sink answered %d", resp.StatusCode)
	}
	return nil
}

// postLoop sends n POSTs of body from workers goroutines, each sequential
// on its own keep-alive connection, and reports how long they took.
func postLoop(ctx context.Context, client *http.Client, url string, n, workers int, body []byte, h http.Header) (childReport, error) {
	// One POST per worker first, so connection setup is not timed: the
	// bridge's connections are warm too after its first message.
	for range workers {
		if err := post(ctx, client, url, body, h); err != nil {
			return childReport{}, err
		}
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	cpu0, start := selfCPU(), time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := post(ctx, client, url, body, h); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	el, cpu := time.Since(start), selfCPU()-cpu0
	if firstErr != nil {
		return childReport{}, firstErr
	}
	return childReport{Posts: int64(n), Elapsed: el, CPU: cpu}, nil
}

// consumeAndPost runs an ordered consumer on filter, new messages only,
// and POSTs each message to url in order as soon as it arrives, with the
// webhook-id the bridge would give it, until stop closes. It writes its
// readiness on out once the consumer exists.
func consumeAndPost(ctx context.Context, client *http.Client, natsURL, streamName, filter, url string, out *json.Encoder, stop <-chan struct{}) (childReport, error) {
	nc, err := nats.Connect(natsURL, nats.Name("bench-baseline"))
	if err != nil {
		return childReport{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return childReport{}, err
	}
	cons, err := js.OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return childReport{}, fmt.Errorf("ordered consumer on %s: %w", filter, err)
	}
	// The headers the bridge would send for a message of filter (a
	// subject without wildcards in every use), made once: projecting each
	// message here would time a projection the baseline is meant to
	// leave out.
	h, err := wireHeaders(streamName, filter, 100_000, nil, time.Now())
	if err != nil {
		return childReport{}, err
	}
	it, err := cons.Messages()
	if err != nil {
		return childReport{}, err
	}
	cpu0, start := selfCPU(), time.Now()
	if err := out.Encode(childReport{Ready: true}); err != nil {
		it.Stop()
		return childReport{}, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		case <-done:
		}
		it.Stop()
	}()
	var rep childReport
	for {
		msg, err := it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return childReport{}, err
			}
			break
		}
		md, err := msg.Metadata()
		if err != nil {
			fmt.Fprintln(os.Stderr, "baseline consumer:", err)
			rep.Failed++
			continue
		}
		seq := strconv.FormatUint(md.Sequence.Stream, 10)
		// The message's own identity in the template's places; the
		// previous POST is done with the map.
		id := streamName + "-" + seq
		h["Ce-Id"], h["Webhook-Id"], h["Ce-Natsseq"] = []string{id}, []string{id}, []string{seq}
		h["Ce-Subject"] = []string{msg.Subject()}
		if err := post(ctx, client, url, msg.Data(), h); err != nil {
			fmt.Fprintln(os.Stderr, "baseline consumer:", err)
			rep.Failed++
			continue
		}
		rep.Posts++
	}
	if err := ctx.Err(); err != nil {
		return childReport{}, err
	}
	rep.Elapsed, rep.CPU = time.Since(start), selfCPU()-cpu0
	return rep, nil
}
