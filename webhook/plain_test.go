package webhook

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/projection"
)

// rawReceiver is a loopback TCP server that speaks HTTP by hand, so a test
// can answer in ways net/http's server never would. serve gets each
// connection and its reader; it owns the connection until it returns, and
// the connection is closed after.
type rawReceiver struct {
	ln       net.Listener
	conns    atomic.Int32
	requests atomic.Int32
	wg       sync.WaitGroup
}

func newRawReceiver(t *testing.T, serve func(rr *rawReceiver, c net.Conn, br *bufio.Reader)) *rawReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rr := &rawReceiver{ln: ln}
	rr.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rr.conns.Add(1)
			rr.wg.Go(func() {
				defer c.Close()
				serve(rr, c, bufio.NewReader(c))
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); rr.wg.Wait() })
	return rr
}

func (rr *rawReceiver) url() string { return "http://" + rr.ln.Addr().String() + "/hook" }

// read reads one request and its body; false when the client hung up.
func (rr *rawReceiver) read(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	rr.requests.Add(1)
	return true
}

// answerEach answers every request on a connection with answer.
func answerEach(answer string) func(*rawReceiver, net.Conn, *bufio.Reader) {
	return func(rr *rawReceiver, c net.Conn, br *bufio.Reader) {
		for rr.read(br) {
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

func sendTo(t *testing.T, s *Sender, url, id string) Outcome {
	t.Helper()
	return s.Send(context.Background(), Request{Namespace: projection.Outbox, URL: url, Message: message(id)})
}

// A receiver that closes a kept-alive connection while it sits idle (as
// Node's server does after five seconds) costs no failed attempt: the
// request goes again, once, on a new connection.
func TestPlainResendsOnAConnectionClosedWhileIdle(t *testing.T) {
	closed := make(chan struct{}, 4)
	rr := newRawReceiver(t, func(rr *rawReceiver, c net.Conn, br *bufio.Reader) {
		if rr.read(br) {
			_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
		_ = c.Close()
		closed <- struct{}{}
	})
	s := newSender(t)
	for i := range 3 {
		if o := sendTo(t, s, rr.url(), "m"); o.Status != http.StatusNoContent {
			t.Fatalf("send %d: %s", i, o.Error())
		}
		<-closed
	}
	if c, r := rr.conns.Load(), rr.requests.Load(); c != 3 || r != 3 {
		t.Errorf("3 sends made %d connections and %d requests, want 3 and 3", c, r)
	}
}

// A fresh connection that fails is the receiver's failure: reported, not
// resent.
func TestPlainDoesNotResendOnAFreshConnection(t *testing.T) {
	rr := newRawReceiver(t, func(rr *rawReceiver, _ net.Conn, br *bufio.Reader) { rr.read(br) })
	o := sendTo(t, newSender(t), rr.url(), "m")
	if o.Class != ClassTransport || !strings.Contains(o.Error(), "receiver closed the connection without an answer: EOF") {
		t.Errorf("outcome %+v (%s), want a transport failure", o, o.Error())
	}
	if n := rr.requests.Load(); n != 1 {
		t.Errorf("the receiver got %d requests, want 1", n)
	}
}

// Informational answers are skipped, and an answer whose head cannot be
// used fails the POST and closes its connection.
func TestPlainAnswerHeads(t *testing.T) {
	hints := "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	for _, c := range []struct {
		name, answer string
		status       int
		err          string
	}{
		{"skipped", hints + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", http.StatusOK, ""},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 0, "101 Switching Protocols"},
		{"endless", strings.Repeat(hints, 4), 0, "more than 5 informational answers"},
		{"head past the cap", "HTTP/1.1 200 OK\r\nX-Padding: " + strings.Repeat("x", 1<<20) + "\r\n\r\n", 0, "response headers exceed 65536 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := newRawReceiver(t, answerEach(c.answer))
			s := newSender(t)
			for range 2 {
				o := sendTo(t, s, rr.url(), "m")
				if o.Status != c.status || (c.err != "" && !strings.Contains(o.Error(), c.err)) {
					t.Fatalf("outcome %+v (%s), want status %d and an error saying %q", o, o.Error(), c.status, c.err)
				}
			}
			want := int32(1)
			if c.err != "" {
				want = 2
			}
			if got := rr.conns.Load(); got != want {
				t.Errorf("2 sends opened %d connections, want %d", got, want)
			}
		})
	}
}

// A connection is reused only after an answer read to its end, with
// nothing after it and no Connection: close.
func TestPlainReusesOnlyCleanConnections(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		conns        int32
	}{
		{"keep-alive", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 1},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 1},
		{"connection close", "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", 3},
		{"HTTP/1.0", "HTTP/1.0 204 No Content\r\n\r\n", 3},
		{"bytes after the answer", "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 500 Unsolicited\r\n\r\n", 3},
		{"body past the cap", "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("x", 70000), 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := newRawReceiver(t, answerEach(c.answer))
			s := newSender(t)
			for i := range 3 {
				if o := sendTo(t, s, rr.url(), "m"); !o.OK() {
					t.Fatalf("send %d: %s", i, o.Error())
				}
			}
			if got := rr.conns.Load(); got != c.conns {
				t.Errorf("3 sends opened %d connections, want %d", got, c.conns)
			}
		})
	}
}

// A receiver that refuses a body without reading it, answers and hangs up
// is heard: its answer, not the broken write, is the outcome.
func TestPlainAnswerBeforeTheBodyIsRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	t.Cleanup(srv.Close)
	m := message("big")
	m.Body = make([]byte, 32<<20)
	o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: m})
	if o.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("outcome %+v (%s), want the receiver's 413", o, o.Error())
	}
}

// Header fields the transport would refuse are refused here too, before
// anything is sent.
func TestPlainRefusesInvalidHeaderFields(t *testing.T) {
	srv, hits := receiver(t, nil)
	for _, c := range []struct{ name, value, want string }{
		{"Bad Name", "v", `invalid header field name "Bad Name"`},
		{"X-Break", "a\r\nX-Evil: 1", `invalid header field value for "X-Break"`},
	} {
		m := message("m")
		m.Header[c.name] = []string{c.value}
		o := newSender(t).Send(context.Background(), Request{Namespace: projection.Outbox, URL: srv.URL, Message: m})
		if o.Class != ClassTransport || !strings.Contains(o.Error(), c.want) {
			t.Errorf("outcome %+v (%s), want an error saying %s", o, o.Error(), c.want)
		}
	}
	noHit(t, hits, "every request had an invalid header field")
}

// Idle connections are closed by Close, and by the idle timeout.
func TestPlainClosesIdleConnections(t *testing.T) {
	for _, c := range []struct {
		name   string
		expire time.Duration
	}{{"Close", time.Hour}, {"idle timeout", 50 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			hungUp := make(chan struct{})
			rr := newRawReceiver(t, func(rr *rawReceiver, conn net.Conn, br *bufio.Reader) {
				answerEach("HTTP/1.1 204 No Content\r\n\r\n")(rr, conn, br)
				close(hungUp)
			})
			s := NewSender()
			defer s.Close()
			s.outbox.plain.idleTimeout = c.expire
			if o := sendTo(t, s, rr.url(), "m"); !o.OK() {
				t.Fatal(o.Error())
			}
			if c.expire == time.Hour {
				s.Close()
			}
			select {
			case <-hungUp:
			case <-time.After(10 * time.Second):
				t.Fatal("the idle connection was not closed")
			}
		})
	}
}

// A deadline or cancel that fires while an answer's body is read spends
// the connection: it is closed, never pooled with its deadline in the past.
func TestPlainCancelDuringBodyClosesTheConnection(t *testing.T) {
	release := make(chan struct{})
	rr := newRawReceiver(t, func(rr *rawReceiver, c net.Conn, br *bufio.Reader) {
		for rr.read(br) {
			_, _ = io.WriteString(c, "HTTP/1.1 500 Oops\r\nContent-Length: 10\r\n\r\nhalf")
			<-release
			_, _ = io.WriteString(c, "-done")
		}
	})
	s := newSender(t, WithTimeout(200*time.Millisecond))
	o := sendTo(t, s, rr.url(), "m")
	close(release)
	if o.Status != http.StatusInternalServerError {
		t.Fatalf("outcome %+v (%s)", o, o.Error())
	}
	if o := sendTo(t, s, rr.url(), "m2"); o.Status != http.StatusInternalServerError {
		t.Fatalf("the send after a timed-out body: %+v (%s)", o, o.Error())
	}
	if n := rr.conns.Load(); n != 2 {
		t.Errorf("2 sends opened %d connections, want 2", n)
	}
}
