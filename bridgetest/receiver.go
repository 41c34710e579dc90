package bridgetest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/jetstream-bridge/bridge/webhook"
)

// signatureTolerance is how far webhook-timestamp may be from the
// receiver's clock, as Standard Webhooks tells receivers to allow.
const signatureTolerance = 5 * time.Minute

// maxBody bounds what a receiver keeps of one POST.
const maxBody = 16 << 20

// Response is one answer of a Receiver.
type Response struct {
	// Status is the HTTP status; 0 is 204 No Content.
	Status int
	// RetryAfter is the Retry-After header (delta-seconds or an HTTP
	// date); empty sends none.
	RetryAfter string
	// Delay is how long the receiver waits before answering, to play a
	// slow receiver; a test that ends cuts it short.
	Delay time.Duration
}

func (r Response) status() int {
	if r.Status == 0 {
		return http.StatusNoContent
	}
	return r.Status
}

// Delivery is one POST a Receiver got, with what it made of it.
type Delivery struct {
	// At is when the POST arrived.
	At time.Time
	// Header and Body are the request's, as received.
	Header http.Header
	Body   []byte
	// Status is what the receiver answered.
	Status int
	// ID is the webhook-id header: stable for one journal message (and
	// one A2A event of it) across retries, the key to deduplicate on.
	ID string
	// Seq is the journal sequence the POST carries: the CloudEvent's
	// natsseq extension, the first event's of a batch, or the sequence in
	// an A2A webhook-id; 0 when it carries none (a CloudEvent published
	// as one passes through with its own attributes).
	Seq uint64
	// SignatureErr is why the webhook-signature does not verify with the
	// receiver's secret; nil when it does.
	SignatureErr error
	// Event is the CloudEvent of an outbox POST, binary or structured
	// mode; Batch holds the events of a batch POST instead.
	Event *ce.Event
	Batch []ce.Event
	// A2A is the StreamResponse of an a2a POST.
	A2A *StreamResponse
	// DecodeErr is why the body is neither a CloudEvent nor a
	// StreamResponse, as its Content-Type says it should be.
	DecodeErr error
}

// Accepted reports whether the receiver answered the POST 2xx, the one
// answer that moves a registration's cursor.
func (d Delivery) Accepted() bool { return d.Status >= 200 && d.Status < 300 }

// StreamResponse is an A2A 1.0 push notification body: exactly one member
// is set. StatusUpdate is decoded; the other members are kept as JSON.
type StreamResponse struct {
	Task           json.RawMessage `json:"task,omitempty"`
	Message        json.RawMessage `json:"message,omitempty"`
	StatusUpdate   *StatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate json.RawMessage `json:"artifactUpdate,omitempty"`
}

// StatusUpdate is an A2A TaskStatusUpdateEvent.
type StatusUpdate struct {
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId"`
	Status    struct {
		State     string          `json:"state"`
		Message   json.RawMessage `json:"message,omitempty"`
		Timestamp string          `json:"timestamp,omitempty"`
	} `json:"status"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Receiver is a webhook receiver on loopback that records every POST.
// It is safe for concurrent use; the bridge POSTs to it concurrently.
type Receiver struct {
	// URL is where it listens, with the path /hook.
	URL string
	// Secret is its Standard Webhooks signing secret (whsec_…), which
	// Outbox and A2A put in the registration.
	Secret string

	tb   testing.TB
	wait time.Duration
	key  []byte
	srv  *httptest.Server
	done chan struct{} // closed at the end of the test: delays stop

	mu        sync.Mutex
	answers   []Response
	answered  int
	got       []Delivery
	accepted  int
	arrivals  chan struct{} // closed and replaced at each POST
	closeOnce sync.Once
}

// Receiver starts a recording receiver that answers its POSTs with
// answers in turn, the last one from then on (204 when none are given),
// and stops it when the test ends.
func (e *Env) Receiver(answers ...Response) *Receiver {
	e.tb.Helper()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	r := &Receiver{
		Secret:   webhook.SecretPrefix + base64.StdEncoding.EncodeToString(raw),
		tb:       e.tb,
		wait:     e.wait,
		key:      raw,
		done:     make(chan struct{}),
		answers:  answers,
		arrivals: make(chan struct{}),
	}
	r.srv = httptest.NewServer(r)
	r.URL = r.srv.URL + "/hook"
	e.tb.Cleanup(r.close)
	return r
}

func (r *Receiver) close() {
	r.closeOnce.Do(func() {
		close(r.done)
		r.srv.Close()
	})
}

// Respond replaces the receiver's answers from the next POST on: answers
// in turn, the last one from then on.
func (r *Receiver) Respond(answers ...Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers, r.answered = answers, 0
}

// Outbox is a registration of this receiver for the outbox namespace:
// CloudEvents of the journal's messages on subject (a filter such as
// journal.orders.>), signed with the receiver's secret.
func (r *Receiver) Outbox(subject string) Registration {
	return Registration{Namespace: "outbox", Subject: subject, URL: r.URL, Secret: r.Secret}
}

// A2A is a registration of this receiver for the a2a namespace: push
// notifications of task taskID (published on journal.a2a.<taskID>),
// signed with the receiver's secret.
func (r *Receiver) A2A(taskID string) Registration {
	return Registration{Namespace: "a2a", TaskID: taskID, URL: r.URL, Secret: r.Secret}
}

// All returns every POST received so far, in arrival order, whatever it
// was answered.
func (r *Receiver) All() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Accepted returns the POSTs answered 2xx so far, in arrival order.
func (r *Receiver) Accepted() []Delivery { return accepted(r.All()) }

func accepted(all []Delivery) []Delivery {
	var out []Delivery
	for _, d := range all {
		if d.Accepted() {
			out = append(out, d)
		}
	}
	return out
}

// WaitFor waits until the receiver has answered n POSTs 2xx and returns
// those it accepted, in arrival order (n or more: at least once means a
// POST may come twice). It fails the test, saying what did arrive, when
// they do not come within the Env's wait. Call it from the test's own
// goroutine.
func (r *Receiver) WaitFor(n int) []Delivery {
	r.tb.Helper()
	deadline := time.NewTimer(r.wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		count, arrived := r.accepted, r.arrivals
		r.mu.Unlock()
		if count >= n {
			return r.Accepted()
		}
		select {
		case <-arrived:
		case <-deadline.C:
			r.tb.Fatalf("bridgetest: receiver %s accepted %d POSTs within %v, want %d; it got:\n%s",
				r.URL, count, r.wait, n, describe(r.All()))
			return nil
		}
	}
}

// describe is a line per delivery, for failure messages.
func describe(ds []Delivery) string {
	if len(ds) == 0 {
		return "  nothing"
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %s webhook-id=%s seq=%d answered %d", d.At.Format(time.RFC3339Nano), d.ID, d.Seq, d.Status)
		if d.SignatureErr != nil {
			fmt.Fprintf(&b, " signature: %v", d.SignatureErr)
		}
		if d.DecodeErr != nil {
			fmt.Fprintf(&b, " decode: %v", d.DecodeErr)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ServeHTTP records the POST and answers it.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	d := decode(req.Header, body)
	d.SignatureErr = webhook.VerifyRequest([][]byte{r.key}, req.Header, body, time.Now(), signatureTolerance)
	answer := r.next()
	if answer.Delay > 0 {
		select {
		case <-time.After(answer.Delay):
		case <-req.Context().Done():
		case <-r.done:
		}
	}
	d.Status = answer.status()
	r.record(d)
	if answer.RetryAfter != "" {
		w.Header().Set("Retry-After", answer.RetryAfter)
	}
	w.WriteHeader(d.Status)
}

// next is the answer to the next POST.
func (r *Receiver) next() Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) == 0 {
		return Response{}
	}
	a := r.answers[min(r.answered, len(r.answers)-1)]
	r.answered++
	return a
}

func (r *Receiver) record(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d)
	if d.Accepted() {
		r.accepted++
	}
	close(r.arrivals)
	r.arrivals = make(chan struct{})
}

// decode reads a POST as its Content-Type says: an A2A StreamResponse, a
// CloudEvents batch, or a CloudEvent in binary or structured mode.
func decode(h http.Header, body []byte) Delivery {
	d := Delivery{At: time.Now(), Header: h.Clone(), Body: body, ID: h.Get(webhook.HeaderID)}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	req := &http.Request{Method: http.MethodPost, Header: h, Body: io.NopCloser(bytes.NewReader(body))}
	switch {
	case mt == "application/a2a+json":
		d.A2A = &StreamResponse{}
		if d.DecodeErr = json.Unmarshal(body, d.A2A); d.DecodeErr != nil {
			d.A2A = nil
		}
		d.Seq = a2aSeq(d.ID)
	case mt == "application/cloudevents-batch+json":
		d.Batch, d.DecodeErr = cehttp.NewEventsFromHTTPRequest(req)
		if len(d.Batch) > 0 {
			d.Seq = natsSeq(&d.Batch[0])
		}
	default:
		d.Event, d.DecodeErr = cehttp.NewEventFromHTTPRequest(req)
		if d.Event != nil {
			d.Seq = natsSeq(d.Event)
		}
	}
	return d
}

// natsSeq is the natsseq extension of e, 0 without one.
func natsSeq(e *ce.Event) uint64 {
	v, ok := e.Extensions()["natsseq"]
	if !ok {
		return 0
	}
	n, _ := strconv.ParseUint(fmt.Sprint(v), 10, 64)
	return n
}

// a2aSeq is the sequence of an A2A webhook-id, <stream>-<seq>-<index>.
func a2aSeq(id string) uint64 {
	parts := strings.Split(id, "-")
	if len(parts) < 3 {
		return 0
	}
	n, _ := strconv.ParseUint(parts[len(parts)-2], 10, 64)
	return n
}
