package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one line of the table: a figure of the bridge beside its
// baseline and its target.
type row struct {
	what     string // "S1 drain (msg/s)"
	bridge   string
	baseline string
	ratio    string
	target   string
	met      string // "yes", "no", "n/a"
}

// result is what one scenario measured.
type result struct {
	name string
	rows []row
	// line is the scenario's one-line summary, with its ratio.
	line string
	err  error
}

func failed(name, what string, err error) result {
	return result{name: name, err: err,
		rows: []row{{what: what, bridge: "failed", baseline: "-", ratio: "-", target: "-", met: "no"}},
		line: fmt.Sprintf("%s: failed: %v", name, err)}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func ratio(bridge, bare float64) string {
	if bare <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", bridge/bare)
}

// count formats n with thousands separators.
func count(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func report(w io.Writer, mode string, results []result) {
	fmt.Fprintf(w, "jetstream-bridge benchmark (%s)\n", mode)
	fmt.Fprintln(w, machine())
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tbridge\tbaseline\tratio\ttarget\tmet?")
	for _, r := range results {
		for _, x := range r.rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.what, x.bridge, x.baseline, x.ratio, x.target, x.met)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintln(w, r.line)
	}
}

// machine is the line that says where the figures were measured.
func machine() string {
	kernel := "unknown"
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	} else if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("machine: %d CPUs, %s/%s, %s, kernel %s, %s",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), kernel,
		time.Now().UTC().Format(time.RFC3339))
}
