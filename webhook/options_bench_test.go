package webhook

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
	"github.com/jetstream-bridge/bridge/projection"
)

// benchSend runs Sends of req, a 1 KiB message signed with one secret.
func benchSend(b *testing.B, s *Sender, req Request) {
	req.Message = projection.Message{ID: "JOURNAL-1", Header: http.Header{"Content-Type": {"application/json"}}, Body: benchBody()}
	req.Secrets, req.At = []string{testSecret(1, 32)}, time.Now()
	b.SetBytes(int64(len(req.Message.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if o := s.Send(context.Background(), req); !o.OK() {
			b.Fatal(o.Error())
		}
	}
}

// BenchmarkSendHeaders1KiB is BenchmarkSend1KiB with three registration
// headers: what they cost on the plain fast path.
func BenchmarkSendHeaders1KiB(b *testing.B) {
	srv := benchServer(b)
	s := NewSender()
	b.Cleanup(s.Close)
	benchSend(b, s, Request{Namespace: projection.Outbox, URL: srv.URL + "/hook",
		Headers: map[string]string{"X-Team": "billing", "X-Env": "prod", "X-Tenant": "t-42"}})
}

// BenchmarkSendTLS1KiB and BenchmarkSendMutualTLS1KiB send over kept-alive
// HTTPS to a receiver trusted through the registration's own CA, without
// and with a client certificate: the pool lookup per POST, the handshake
// paid once per connection.
func BenchmarkSendTLS1KiB(b *testing.B)       { benchTLS(b, false) }
func BenchmarkSendMutualTLS1KiB(b *testing.B) { benchTLS(b, true) }

func benchTLS(b *testing.B, mutual bool) {
	pki := testutil.NewPKI(b, "bench CA")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = pki.ServerTLS(pki.Server(b, "127.0.0.1"))
	settings := &TLS{CACertificates: pki.CAPEM}
	if mutual {
		client := pki.Client(b, "bench")
		settings.ClientCertificate, settings.ClientKey = client.CertPEM, client.KeyPEM
	} else {
		srv.TLS.ClientAuth = 0
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	b.Cleanup(srv.Close)
	s := NewSender()
	b.Cleanup(s.Close)
	benchSend(b, s, Request{Namespace: projection.Outbox, URL: srv.URL + "/hook", TLS: settings})
}
