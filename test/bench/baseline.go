package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// The baselines run in a process of their own: the bench binary run again
// with childArg as its first argument (see baseline_child.go). The bridge
// is a process apart from the sink and the nats-server, so each of its
// POSTs crosses from one Go runtime to another, with the wakeups and
// context switches that costs on a small machine; a baseline in the
// bench's own runtime would never pay that, and would set the bar on a
// limit the bridge cannot sit on.

// childReport is a line of JSON a baseline process writes on stdout: a
// consumer's readiness, then, from every mode, one final report.
type childReport struct {
	Ready  bool  `json:"ready,omitempty"`
	Posts  int64 `json:"posts"`
	Failed int64 `json:"failed,omitempty"` // POSTs that failed (consumer mode)
	// Elapsed and CPU cover the measured window only: the timed loop, or
	// the consumer from ready to stop. CPU is user + system time read
	// from the process's own /proc/self/stat, the file the bridge's CPU is
	// read from.
	Elapsed time.Duration `json:"elapsedNs"`
	CPU     time.Duration `json:"cpuNs"`
	Error   string        `json:"error,omitempty"`
}

// child is a running baseline process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// startChild runs the bench binary again in baseline mode. Its stderr is
// the bench's, so its complaints show in the progress log.
func startChild(ctx context.Context, mode string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the bench binary: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{childArg, mode}, args...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttrs()
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s baseline process: %w", mode, err)
	}
	return &child{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// report reads the child's next line.
func (c *child) report() (childReport, error) {
	if !c.lines.Scan() {
		err := c.lines.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return childReport{}, fmt.Errorf("baseline process %d ended without a report: %w", c.pid(), err)
	}
	var r childReport
	if err := json.Unmarshal(c.lines.Bytes(), &r); err != nil {
		return r, fmt.Errorf("baseline process %d: unreadable report %q: %w", c.pid(), c.lines.Bytes(), err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("baseline process %d: %s", c.pid(), r.Error)
	}
	return r, nil
}

// finish closes the child's stdin, which stops a consumer, reads its final
// report and waits for it to exit. A child that says nothing within limit
// is killed; a limit of 0 waits as long as it takes.
func (c *child) finish(limit time.Duration) (childReport, error) {
	_ = c.stdin.Close()
	if limit > 0 {
		kill := time.AfterFunc(limit, func() {
			logf("baseline process %d sent no report within %v; killing it", c.pid(), limit)
			_ = c.cmd.Process.Kill()
		})
		defer kill.Stop()
	}
	r, rerr := c.report()
	werr := c.cmd.Wait()
	switch {
	case rerr != nil && werr != nil:
		return r, fmt.Errorf("%w (%v)", rerr, werr)
	case rerr != nil:
		return r, rerr
	case werr != nil:
		return r, fmt.Errorf("baseline process %d: %w", c.pid(), werr)
	}
	return r, nil
}

// kill ends a child that is no longer wanted.
func (c *child) kill() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// bareRun is one run of a bare POST loop.
type bareRun struct {
	rate  float64       // POSTs per second
	posts int           // timed POSTs
	cpu   time.Duration // the baseline process's CPU over them
}

// wire is what a baseline's POSTs carry besides their body: the headers
// the bridge sends with a message of stream on subject (wireHeaders in the
// child), then extra ("Name: value" lines, as a registration's options
// add them). The zero wire sends a Content-Type only. With batch, each
// POST is a CloudEvents batch of that many events of the body's size, as
// the bridge's batch mode sends them (wireBatch). With delayed, the POSTs
// go where the sink answers them after its delay, as it answers a
// registration's.
type wire struct {
	stream, subject string
	extra           []string
	batch           int
	delayed         bool
}

func (w wire) args() []string {
	var a []string
	if w.stream != "" || w.subject != "" {
		a = append(a, "-stream", w.stream, "-subject", w.subject)
	}
	for _, h := range w.extra {
		a = append(a, "-header", h)
	}
	if w.batch > 0 {
		a = append(a, "-batch", strconv.Itoa(w.batch))
	}
	return a
}

// events is how many events each POST of w carries.
func (w wire) events() int { return max(w.batch, 1) }

// barePOSTs is the raw limit of delivery to the sink: n POSTs of size
// bytes (of each event, for a batch), with the headers of w, from workers
// goroutines in a process of their own, each worker sequential on its own
// keep-alive connection, with no journal, no store and no projection.
func (e *env) barePOSTs(ctx context.Context, n, workers, size int, w wire) (bareRun, error) {
	before, eventsBefore := e.sink.bare.Load(), e.sink.bareEvents.Load()
	path := "/bare"
	if w.delayed {
		path = delayedBarePath
	}
	c, err := startChild(ctx, "post", append([]string{
		"-url", e.sink.url + path,
		"-n", strconv.Itoa(n),
		"-workers", strconv.Itoa(workers),
		"-size", strconv.Itoa(size),
	}, w.args()...)...)
	if err != nil {
		return bareRun{}, err
	}
	// No limit on the whole loop, which is as long as the machine makes
	// it; a stuck sink fails it instead, each POST timing out after
	// stallAfter.
	rep, err := c.finish(0)
	if err != nil {
		return bareRun{}, err
	}
	// The sink counts what it was sent, so a figure the child only claims
	// cannot pass: its untimed warm-up POSTs are one per worker.
	if got, want := e.sink.bare.Load()-before, int64(n+workers); got != want || rep.Posts != int64(n) || rep.Elapsed <= 0 {
		return bareRun{}, fmt.Errorf("baseline process reported %d timed POSTs in %v; the sink counted %d, want %d",
			rep.Posts, rep.Elapsed, got, want)
	}
	if w.batch > 0 {
		if got, want := e.sink.bareEvents.Load()-eventsBefore, int64((n+workers)*w.batch); got != want {
			return bareRun{}, fmt.Errorf("baseline process sent %d batches of %d events; the sink read %d events, want %d",
				n+workers, w.batch, got, want)
		}
	}
	return bareRun{rate: float64(n) / rep.Elapsed.Seconds(), posts: n, cpu: rep.CPU}, nil
}

// bareConsumer starts the raw limit of live delivery in a process of its
// own: a JetStream ordered consumer on filter, delivering new messages
// only, each POSTed to the sink's registration 0 in order as soon as it
// arrives, with the webhook-id the bridge would give it. The sink measures
// its publish→arrival times as it does the bridge's. It returns once the
// consumer exists, so every message published after is seen; finish stops
// it.
func (e *env) bareConsumer(ctx context.Context, s stream, filter string) (*child, error) {
	c, err := startChild(ctx, "consumer",
		"-nats", e.natsURL,
		"-stream", s.name,
		"-subject", filter,
		"-url", e.sink.url+"/r/0",
	)
	if err != nil {
		return nil, err
	}
	ready := make(chan error, 1)
	go func() {
		r, err := c.report()
		if err == nil && !r.Ready {
			err = errors.New("baseline consumer's first report is not its readiness")
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(stallAfter):
		err = fmt.Errorf("baseline consumer not ready after %v", stallAfter)
	}
	if err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}
