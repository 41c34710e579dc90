package testutil

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS starts an embedded nats-server with JetStream on loopback, keeping
// its store in dir, on port (-1 for a free one), and stops it when the test
// ends. A test that restarts the server shuts this one down itself and
// starts another on the same dir and port; stopping twice is harmless.
func NATS(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(15 * time.Second) {
		t.Fatal("nats-server did not start within 15 s")
	}
	return srv
}
