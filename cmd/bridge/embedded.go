package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded returns the URL to connect to, starting the embedded server
// when no --nats-url was given.
func startEmbedded(c *runConfig, log *slog.Logger) (string, *server.Server, error) {
	if c.natsURL != "" {
		return c.natsURL, nil, nil
	}
	host, portStr, err := net.SplitHostPort(c.embeddedListen)
	if err != nil {
		return "", nil, fmt.Errorf("--embedded-listen %q: %w", c.embeddedListen, err)
	}
	port, err := net.LookupPort("tcp", portStr)
	if err != nil {
		return "", nil, fmt.Errorf("--embedded-listen %q: %w", c.embeddedListen, err)
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "bridge-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(c.dataDir, "nats"),
		NoSigs:     true,
	})
	if err != nil {
		return "", nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return "", nil, fmt.Errorf("embedded nats-server did not start listening on %s (is the port in use? set --embedded-listen)", c.embeddedListen)
	}
	log.Info("embedded nats-server with JetStream started", "listen", ns.ClientURL(), "store", filepath.Join(c.dataDir, "nats"))
	return ns.ClientURL(), ns, nil
}
