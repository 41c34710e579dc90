package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkApply10000 applies a file of 10,000 registrations with the
// real binary to a local bridge (embedded NATS, bolt store): first-s is
// the run that creates them, second-s the run that finds them all
// unchanged, list-s `bridge list` of the 10,000, the reading the second
// run is measured against. Reported, never asserted:
//
//	go test ./test/e2e -run '^$' -bench Apply10000 -benchtime 1x
func BenchmarkApply10000(b *testing.B) {
	const n = 10000
	for _, format := range []string{"json", "yaml"} {
		b.Run(format, func(b *testing.B) {
			var first, second, list time.Duration
			for range b.N {
				b.StopTimer()
				admin, dataDir, stop := startBenchBridge(b)
				file := filepath.Join(b.TempDir(), "registrations."+format)
				if err := os.WriteFile(file, benchManifest(n, format == "json"), 0o600); err != nil {
					b.Fatal(err)
				}
				cli := func(want string, args ...string) time.Duration {
					full := append([]string{args[0], "--admin-url", "http://" + admin, "--data-dir", dataDir}, args[1:]...)
					cmd := exec.Command(bin.bridge, full...)
					cmd.Env = append(os.Environ(), "BRIDGE_ADMIN_TOKEN=", "BENCH_SECRET="+secret)
					start := time.Now()
					out, err := cmd.Output()
					took := time.Since(start)
					if err != nil || strings.Count(string(out), want) != n {
						b.Fatalf("bridge %v: %v, %d lines of %q\n%.2000s", args, err, strings.Count(string(out), want), want, out)
					}
					return took
				}
				b.StartTimer()
				first += cli("+ create", "apply", "-f", file)
				second += cli("= unchanged", "apply", "-f", file)
				list += cli("bench-", "list", "--limit", "1000")
				b.StopTimer()
				stop()
			}
			runs := float64(b.N)
			b.ReportMetric(first.Seconds()/runs, "first-s")
			b.ReportMetric(second.Seconds()/runs, "second-s")
			b.ReportMetric(list.Seconds()/runs, "list-s")
		})
	}
}

// benchManifest is a file of n registrations, each signed with a secret
// from the environment.
func benchManifest(n int, asJSON bool) []byte {
	regs := make([]map[string]string, n)
	for i := range regs {
		regs[i] = map[string]string{"id": fmt.Sprintf("bench-%05d", i), "namespace": "outbox",
			"subject": fmt.Sprintf("journal.bench.%d", i), "url": fmt.Sprintf("http://127.0.0.1:9/hook/%d", i), "secret": "${BENCH_SECRET}"}
	}
	if asJSON {
		data, _ := json.MarshalIndent(map[string]any{"registrations": regs}, "", "  ")
		return data
	}
	var b strings.Builder
	b.WriteString("registrations:\n")
	for _, r := range regs {
		fmt.Fprintf(&b, "  - id: %s\n    namespace: %s\n    subject: %s\n    url: %s\n    secret: %s\n", r["id"], r["namespace"], r["subject"], r["url"], r["secret"])
	}
	return []byte(b.String())
}

// startBenchBridge runs a bridge on an embedded server in a fresh data
// directory until its admin API answers, and returns how to stop it.
func startBenchBridge(b *testing.B) (admin, dataDir string, stop func()) {
	b.Helper()
	addr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	admin, dataDir = addr(), b.TempDir()
	cmd := exec.Command(bin.bridge, "run", "--data-dir", dataDir, "--embedded-listen", addr(), "--admin-listen", admin)
	cmd.Env = append(os.Environ(), "NATS_URL=")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if res, err := http.Get("http://" + admin + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return admin, dataDir, stop
			}
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatal("the bridge did not answer /healthz within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
