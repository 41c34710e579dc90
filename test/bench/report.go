package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
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
	// figure is the headline rate, for comparing scenarios of one run;
	// 0 when there is none. vsBare is figure over the bare loop measured
	// beside it.
	figure, vsBare float64
	err            error
}

// comparison is two variants of one scenario in the same run: what
// changing one thing (the stream's configuration, the attempt log) costs.
type comparison struct {
	base, other variant
	// label names the ratio other ÷ base in the report.
	label  string
	target float64
}

// The comparisons a run reports when both sides ran.
var comparisons = []comparison{
	{s1, s1d, "default stream ÷ allow_direct stream", 0.95},
	{s2, s2d, "default stream ÷ allow_direct stream", 0.95},
	{s1o, s1, "attempt log on ÷ off", 0.90},
	{s2o, s2, "attempt log on ÷ off", 0.90},
	{s2, s2f, "filters passing half of 2× the messages ÷ none", 0.90},
}

// sameRun adds, after the other side's first row, the ratio rows of each
// comparison. The first divides the rates; the second each rate's ratio to
// the bare loop run beside it, since the two scenarios run minutes apart
// and this machine's speed drifts by more than the difference sought (the
// bare loops show by how much). A pair with a side not run has no rows.
func sameRun(results []result, pairs ...comparison) []result {
	byName := map[string]*result{}
	for i := range results {
		byName[results[i].name] = &results[i]
	}
	for _, p := range pairs {
		base, other := byName[p.base.name], byName[p.other.name]
		if base == nil || other == nil {
			continue
		}
		want := fmt.Sprintf("≥ %.2f", p.target)
		x := row{what: p.base.name[:2] + " " + p.label + ", same run", bridge: "n/a", baseline: "-", ratio: "-", target: want, met: "n/a"}
		y := row{what: p.base.name[:2] + " the same, each against its bare loop", bridge: "n/a", baseline: "-", ratio: "-", target: want, met: "n/a"}
		if base.figure > 0 && other.figure > 0 {
			r := other.figure / base.figure
			x.bridge, x.baseline, x.ratio, x.met = count(other.figure), count(base.figure), ratioFor(r, p.target), yesNo(r >= p.target)
			rn := other.vsBare / base.vsBare
			y.bridge, y.baseline = fmt.Sprintf("%.2f", other.vsBare), fmt.Sprintf("%.2f", base.vsBare)
			y.ratio, y.met = ratioFor(rn, p.target), yesNo(rn >= p.target)
			other.line += fmt.Sprintf("; %s ÷ %s, same run: %.2f (%.2f against their bare loops)", p.other.name, p.base.name, r, rn)
		}
		other.rows = slices.Insert(other.rows, min(1, len(other.rows)), x, y)
	}
	return results
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

// ratioFor formats r beside a target: two decimals, or as many more as
// it takes for a miss not to round up to the target, where the row would
// read "0.95 ≥ 0.95 no".
func ratioFor(r, target float64) string { return ratioShown(r, target, r < target) }

// ratioAbove is ratioFor beside a ceiling: a ratio over it does not
// round down to it, where the row would read "1.50 ≤ 1.5 no".
func ratioAbove(r, ceiling float64) string { return ratioShown(r, ceiling, r > ceiling) }

func ratioShown(r, target float64, missed bool) string {
	digits := 2
	for missed && digits < 6 && fmt.Sprintf("%.*f", digits, r) == fmt.Sprintf("%.*f", digits, target) {
		digits++
	}
	return fmt.Sprintf("%.*f", digits, r)
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
