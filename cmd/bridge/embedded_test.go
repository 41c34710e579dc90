package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// A cluster address or route the embedded server could not use stops
// `bridge run` with exit 2 and the flag's name, before anything starts.
func TestRunRefusesBadEmbeddedCluster(t *testing.T) {
	cleanEnv(t)
	for flags, want := range map[string]string{
		"--embedded-cluster 6222":                                                                 `--embedded-cluster "6222"`,
		"--embedded-cluster 127.0.0.1:http":                                                       `--embedded-cluster "127.0.0.1:http": port "http" is not a number`,
		"--embedded-cluster 127.0.0.1:0":                                                          `--embedded-cluster "127.0.0.1:0": port "0"`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes 127.0.0.1:6223":                      `--embedded-routes "127.0.0.1:6223"`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes nats://127.0.0.1:6223,http://h:6224": `--embedded-routes "http://h:6224": want nats://HOST:PORT`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes nats://h":                            `--embedded-routes "nats://h"`,
		"--embedded-cluster 127.0.0.1:6222 --embedded-routes nats://u:p@h:6223":                   `--embedded-routes "nats://u:p@h:6223": want nats://HOST:PORT`,
		"--embedded-routes nats://h:6223":                                                         "--embedded-routes needs --embedded-cluster",
		"--embedded-cluster 127.0.0.1:6222 --nats-url nats://127.0.0.1:4222":                      "--nats-url (or NATS_URL) replaces",
		"--embedded-name a/b":                                                                     `--embedded-name "a/b"`,
	} {
		dir := t.TempDir()
		t.Run(flags, func(t *testing.T) {
			cli(t, "", append([]string{"run", "--data-dir", dir}, strings.Fields(flags)...)...).want(t, 2, want)
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("%d files left in the data directory", len(left))
			}
		})
	}
}

// Three bridges' embedded servers, given each other's routes, form one
// JetStream cluster: a stream of three replicas created through one is
// placed on all three and readable through another.
func TestEmbeddedServersFormOneCluster(t *testing.T) {
	cleanEnv(t)
	ports := testutil.FreePorts(t, 6)
	routes := make([]string, 3)
	for i := range routes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i])
	}
	servers := make([]*server.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range servers {
		c := embeddedConfig(t, t.TempDir(), "--embedded-listen", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"--embedded-cluster", fmt.Sprintf("127.0.0.1:%d", ports[3+i]),
			"--embedded-routes", strings.Join(routes, ","), "--embedded-name", fmt.Sprintf("b%d", i+1))
		wg.Go(func() { _, servers[i], errs[i] = startEmbedded(c, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	for i, ns := range servers {
		if ns != nil {
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		}
		if errs[i] != nil {
			t.Fatalf("embedded server b%d: %v", i+1, errs[i])
		}
		if !ns.JetStreamIsCurrent() {
			t.Errorf("startEmbedded returned b%d before it followed a JetStream meta leader", i+1)
		}
	}

	js := testutil.JetStream(t, servers[0].ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatalf("an R3 stream on the embedded cluster: %v", err)
	}
	if _, err := js.Publish(ctx, "r3.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	other := testutil.JetStream(t, servers[2].ClientURL())
	s, err := other.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil || info.Cluster.Name != embeddedClusterName || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("R3 stream's cluster: %+v, want cluster %q with a leader and two replicas", info.Cluster, embeddedClusterName)
	}
	if msg, err := s.GetMsg(ctx, 1); err != nil || string(msg.Data) != "one" {
		t.Fatalf("message 1 read through b3: %v %v", msg, err)
	}
}

// A server whose routes lead nowhere never gets a meta leader: the wait
// says so in the log while it lasts and ends with an error naming the
// flag to check, not with a bridge whose JetStream calls all time out.
func TestEmbeddedClusterWaitIsBoundedAndSaysWhy(t *testing.T) {
	cleanEnv(t)
	ports := testutil.FreePorts(t, 4)
	c := embeddedConfig(t, t.TempDir(), "--embedded-cluster", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--embedded-routes", fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d", ports[1], ports[2]))
	opts := &server.Options{Host: "127.0.0.1", Port: ports[3], JetStream: true, StoreDir: filepath.Join(c.dataDir, "nats"), NoSigs: true, NoLog: true}
	if err := c.cluster.options(opts); err != nil {
		t.Fatal(err)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not listening")
	}
	var logs testutil.SyncBuffer
	err = waitClusterReady(ns, time.Second, slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil || !strings.Contains(err.Error(), "no meta leader within 1s") || !strings.Contains(err.Error(), "--embedded-routes") {
		t.Fatalf("waitClusterReady with no peers: %v, want the bound and --embedded-routes named", err)
	}
	if !strings.Contains(logs.String(), "waiting for the embedded JetStream cluster to elect a meta leader") {
		t.Errorf("the wait logged %q, want its reason", logs.String())
	}
}

// embeddedConfig is `bridge run`'s configuration for args, validated.
func embeddedConfig(t *testing.T, dataDir string, args ...string) *runConfig {
	t.Helper()
	fs, c := runFlags(io.Discard)
	if err := fs.Parse(append([]string{"--data-dir", dataDir}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	return c
}
