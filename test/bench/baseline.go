package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// post sends one POST and reads the answer, as the bridge's sender does.
func (e *env) post(ctx context.Context, url string, body []byte, webhookID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if webhookID != "" {
		req.Header.Set("Webhook-Id", webhookID)
	}
	resp, err := e.client.Do(req)
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

// barePOSTs is the raw limit of delivery to the sink: n POSTs of body from
// workers goroutines, each sequential on its own keep-alive connection,
// with no journal, no store and no projection. It returns POSTs per second.
func (e *env) barePOSTs(ctx context.Context, n, workers int, body []byte) (float64, error) {
	url := e.sink.url + "/bare"
	// One POST per worker first, so connection setup is not timed: the
	// bridge's connections are warm too after its first message.
	for range workers {
		if err := e.post(ctx, url, body, ""); err != nil {
			return 0, err
		}
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := e.post(ctx, url, body, ""); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(n) / el.Seconds(), nil
}

// bareConsumer is the raw limit of live delivery: a JetStream ordered
// consumer on filter, each message POSTed to the sink's registration 0 in
// order, as soon as it arrives, with the webhook-id the bridge would give
// it. stop ends it and waits for its goroutine.
func (e *env) bareConsumer(ctx context.Context, s stream, filter string) (stop func(), err error) {
	cons, err := e.js.OrderedConsumer(ctx, s.name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer on %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	url := e.sink.url + "/r/0"
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := it.Next()
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					logf("bare consumer: %v", err)
				}
				return
			}
			md, err := msg.Metadata()
			if err != nil {
				logf("bare consumer: %v", err)
				continue
			}
			id := s.name + "-" + strconv.FormatUint(md.Sequence.Stream, 10)
			if err := e.post(ctx, url, msg.Data(), id); err != nil {
				logf("bare consumer: %v", err)
			}
		}
	}()
	return func() {
		it.Stop()
		<-done
	}, nil
}
