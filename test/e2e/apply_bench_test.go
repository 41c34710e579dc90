package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkApply10000 applies a file of 10,000 registrations with the
// real binary to a local bridge (embedded NATS, bolt store): first-s is
// the run that creates them, second-s the run that finds them all
// unchanged, list-s `bridge list` of the 10,000, the reading the second
// run is measured against; each -cpu-s beside is the CPU time the client
// and the bridge spent on it, which a busy machine disturbs less than
// the wall clock. Reported, never asserted:
//
//	go test ./test/e2e -run '^$' -bench Apply10000 -benchtime 1x
func BenchmarkApply10000(b *testing.B) {
	const n = 10000
	for _, format := range []string{"json", "yaml"} {
		b.Run(format, func(b *testing.B) {
			var first, second, list, firstCPU, secondCPU, listCPU time.Duration
			for range b.N {
				b.StopTimer()
				admin, dataDir, pid, stop := startBenchBridge(b)
				file := filepath.Join(b.TempDir(), "registrations."+format)
				if err := os.WriteFile(file, benchManifest(n, format == "json"), 0o600); err != nil {
					b.Fatal(err)
				}
				cli := func(wall, cpu *time.Duration, want string, args ...string) {
					full := append([]string{args[0], "--admin-url", "http://" + admin, "--data-dir", dataDir}, args[1:]...)
					cmd := exec.Command(bin.bridge, full...)
					cmd.Env = append(os.Environ(), "BRIDGE_ADMIN_TOKEN=", "BENCH_SECRET="+secret)
					bridgeCPU, start := processCPU(b, pid), time.Now()
					out, err := cmd.Output()
					*wall += time.Since(start)
					if err != nil || strings.Count(string(out), want) != n {
						b.Fatalf("bridge %v: %v, %d lines of %q\n%.2000s", args, err, strings.Count(string(out), want), want, out)
					}
					*cpu += processCPU(b, pid) - bridgeCPU + cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				}
				b.StartTimer()
				cli(&first, &firstCPU, "+ create", "apply", "-f", file)
				// The bridge schedules each new registration once, reading
				// the journal for it: the second run is the next day's,
				// after that.
				b.StopTimer()
				time.Sleep(3 * time.Second)
				b.StartTimer()
				cli(&second, &secondCPU, "= unchanged", "apply", "-f", file)
				cli(&list, &listCPU, "bench-", "list", "--limit", "1000")
				b.StopTimer()
				stop()
			}
			runs := float64(b.N)
			b.ReportMetric(first.Seconds()/runs, "first-s")
			b.ReportMetric(second.Seconds()/runs, "second-s")
			b.ReportMetric(list.Seconds()/runs, "list-s")
			b.ReportMetric(firstCPU.Seconds()/runs, "first-cpu-s")
			b.ReportMetric(secondCPU.Seconds()/runs, "second-cpu-s")
			b.ReportMetric(listCPU.Seconds()/runs, "list-cpu-s")
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

// processCPU is the CPU time process pid has used, from /proc (Linux).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no CPU time of the bridge: %v", err)
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 12th and 13th, in clock ticks of 10 ms.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// startBenchBridge runs a bridge on an embedded server in a fresh data
// directory until its admin API answers, and returns its process id and
// how to stop it.
func startBenchBridge(b *testing.B) (admin, dataDir string, pid int, stop func()) {
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
				return admin, dataDir, cmd.Process.Pid, stop
			}
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatal("the bridge did not answer /healthz within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
