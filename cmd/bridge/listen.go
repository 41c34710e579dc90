package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jetstream-bridge/bridge/webhook"
)

const (
	defaultListenAddr = "127.0.0.1:8090"
	// previewRunes is how much of a body one delivery line shows.
	previewRunes = 200
	// signatureTolerance is how far webhook-timestamp may be from now, as
	// the Standard Webhooks receivers are told to allow.
	signatureTolerance = 5 * time.Minute
	maxDeliveryBytes   = 16 << 20
)

// cmdListen runs a receiver that prints each delivery and answers with
// --status: a way to see what the bridge sends, signature included,
// before pointing it at a real service.
func cmdListen(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	addr := fs.String("addr", defaultListenAddr, "HOST:PORT to listen on (port 0 picks one)")
	secret := fs.String("secret", "", "verify signatures with this whsec_ key")
	status := fs.Int("status", http.StatusNoContent, "HTTP status to answer every delivery with")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	if *status < 200 || *status > 599 {
		return usagef("--status must be an HTTP status from 200 to 599, not %d", *status)
	}
	r := &receiver{out: s.out, status: *status, now: time.Now}
	if *secret != "" {
		key, err := webhook.ParseSecret(*secret)
		if err != nil {
			return usagef("--secret: %v", err)
		}
		r.keys = [][]byte{key}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	r.printf("listening on http://%s (answering %d)\n", ln.Addr(), r.status)
	return serveUntilDone(ctx, ln, r)
}

// serveUntilDone serves on ln until ctx ends, then shuts down gracefully.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", serveErr)
	}
	return err
}

// receiver prints deliveries. Handlers run concurrently; mu keeps each
// delivery's lines together.
type receiver struct {
	mu     sync.Mutex
	out    io.Writer
	keys   [][]byte
	status int
	now    func() time.Time
}

func (r *receiver) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, format, args...)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxDeliveryBytes))
	if err != nil {
		r.printf("%s %s %s: reading the body: %v\n", r.now().Format(time.RFC3339Nano), req.Method, req.URL.Path, err)
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	fields := []string{
		r.now().Format(time.RFC3339Nano),
		req.Method + " " + req.URL.RequestURI(),
		"webhook-id=" + orDash(req.Header.Get(webhook.HeaderID)),
	}
	fields = append(fields, describe(req.Header, body)...)
	fields = append(fields, "signature="+r.signature(req.Header, body))
	r.printf("%s\n    %s\n", strings.Join(fields, " "), preview(body))
	w.WriteHeader(r.status)
}

// signature says whether the delivery is signed and, with a key, whether
// the signature holds.
func (r *receiver) signature(h http.Header, body []byte) string {
	switch {
	case h.Get(webhook.HeaderSignature) == "":
		return "unsigned"
	case len(r.keys) == 0:
		return "present(no --secret to check it)"
	}
	if err := webhook.VerifyRequest(r.keys, h, body, r.now(), signatureTolerance); err != nil {
		return "FAILED(" + err.Error() + ")"
	}
	return "ok"
}

// describe names what the delivery carries: the CloudEvent's type and
// subject, a batch's size, or the A2A event's kind and task.
func describe(h http.Header, body []byte) []string {
	if h.Get("ce-type") != "" || h.Get("ce-subject") != "" {
		return []string{"ce-type=" + orDash(h.Get("ce-type")), "ce-subject=" + orDash(h.Get("ce-subject"))}
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch mt {
	case "application/cloudevents+json":
		var ev struct{ Type, Subject string }
		_ = json.Unmarshal(body, &ev)
		return []string{"ce-type=" + orDash(ev.Type), "ce-subject=" + orDash(ev.Subject), "(structured)"}
	case "application/cloudevents-batch+json":
		var evs []json.RawMessage
		_ = json.Unmarshal(body, &evs)
		return []string{fmt.Sprintf("ce-batch=%d", len(evs))}
	case "application/a2a+json":
		return describeA2A(body)
	}
	return []string{"content-type=" + orDash(h.Get("Content-Type"))}
}

// describeA2A reads an A2A StreamResponse: which event it is, for which
// task, and a status update's state.
func describeA2A(body []byte) []string {
	var resp map[string]json.RawMessage
	if json.Unmarshal(body, &resp) != nil {
		return []string{"a2a=unreadable"}
	}
	for _, kind := range []string{"statusUpdate", "artifactUpdate", "task", "message"} {
		raw, ok := resp[kind]
		if !ok {
			continue
		}
		var ev struct {
			TaskID string `json:"taskId"`
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		_ = json.Unmarshal(raw, &ev)
		task := ev.TaskID
		if kind == "task" {
			task = ev.ID
		}
		out := []string{"a2a=" + kind, "taskId=" + orDash(task)}
		if ev.Status.State != "" {
			out = append(out, "state="+ev.Status.State)
		}
		return out
	}
	return []string{"a2a=unknown"}
}

// preview is the start of a body on one line.
func preview(body []byte) string {
	switch {
	case len(body) == 0:
		return "(empty body)"
	case !utf8.Valid(body):
		return fmt.Sprintf("(%d bytes, not UTF-8 text)", len(body))
	}
	return clip(oneLine(string(body)), previewRunes)
}
