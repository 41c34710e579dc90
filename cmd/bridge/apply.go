package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/jetstream-bridge/bridge/admin"
)

const applySynopsis = "-f FILE [--prune PREFIX] [--dry-run] [--json]"

// applyConcurrency bounds the calls apply has in flight: enough to keep
// a bridge busy over the network's round trips, few enough not to crowd
// out its other clients.
const applyConcurrency = 8

// A plan the API takes holds at most maxPlanEntries entries (the API's
// bound) in a body well under its 1 MiB limit.
const (
	maxPlanEntries = 1000
	maxPlanBytes   = 900 << 10
)

// The changes apply makes, in the words of the API's Bridge-Change header
// where it names them.
const (
	changeCreate    = "create"
	changeUpdate    = "update"
	changeUnchanged = "unchanged"
	changeDelete    = "delete"
)

// mark is a change's line prefix in the plan.
func mark(change string) string {
	switch change {
	case changeCreate:
		return "+"
	case changeUpdate:
		return "~"
	case changeDelete:
		return "-"
	}
	return "="
}

// step is what apply does to one registration.
type step struct {
	id     string
	line   int // in the file; 0 for a registration --prune found
	change string
	body   json.RawMessage // the entry, for a create or an update
	err    error           // the API's refusal of the entry or of its write
}

func cmdApply(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	file := fs.String("f", "", "the registrations file, YAML or JSON ({\"registrations\": [...]}); - reads standard input")
	prune := fs.String("prune", "", "delete the registrations whose id starts with this prefix and that the file does not list")
	dry := fs.Bool("dry-run", false, "print the plan and change nothing")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	switch {
	case *file == "":
		return usagef("-f FILE is required")
	case isSet(fs, "prune") && *prune == "":
		return usagef("--prune needs a prefix: it deletes only the registrations whose id starts with it")
	}
	entries, err := readManifest(*file, s.in)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	c.pool(applyConcurrency)
	steps, err := planApply(ctx, c, entries, *prune)
	if err != nil {
		return err
	}
	if err := s.refused(steps, "nothing applied: %d of %d registrations refused", len(entries)); err != nil {
		return err
	}
	if !*dry {
		if err := writeAll(ctx, c, steps); err != nil {
			return err
		}
	}
	if err := s.printPlan(steps, *dry, cf.json); err != nil {
		return err
	}
	return s.refused(steps, "%d of %d changes failed, the others were made: apply the file again", changes(steps))
}

// readManifest reads and parses the file; nothing is asked of the API
// before the whole file has parsed.
func readManifest(name string, stdin io.Reader) ([]manifestEntry, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(stdin)
		name = "standard input"
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the registrations: %w", err)
	}
	return parseManifest(name, data, os.LookupEnv)
}

// planApply asks the API what each entry would change (POST /v1/plan,
// the dry run of each entry's PUT, or of its create when the id is not
// found) and lists what --prune would delete. The API checks each entry
// as the write would, secrets included, and changes nothing.
func planApply(ctx context.Context, c *adminClient, entries []manifestEntry, prune string) ([]step, error) {
	steps := make([]step, len(entries))
	for i, e := range entries {
		steps[i] = step{id: e.id, line: e.line, body: e.body}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(applyConcurrency)
	for _, chunk := range planChunks(steps) {
		g.Go(func() error { return planChunk(gctx, c, chunk) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if prune == "" {
		return steps, nil
	}
	listed := make(map[string]bool, len(entries))
	for _, e := range entries {
		listed[e.id] = true
	}
	rows, err := listAll(ctx, c, url.Values{"prefix": {prune}, "limit": {"1000"}})
	if err != nil {
		return nil, err
	}
	for _, raw := range rows {
		var r struct {
			ID string `json:"id"`
		}
		if err := decodeAnswer(raw, &r); err != nil {
			return nil, err
		}
		if !listed[r.ID] {
			steps = append(steps, step{id: r.ID, change: changeDelete})
		}
	}
	return steps, nil
}

// planChunks cuts steps into plans the API takes: at most
// maxPlanEntries entries and maxPlanBytes of them each.
func planChunks(steps []step) [][]step {
	var chunks [][]step
	start, size := 0, 0
	for i, st := range steps {
		if i > start && (i-start == maxPlanEntries || size+len(st.body) > maxPlanBytes) {
			chunks = append(chunks, steps[start:i])
			start, size = i, 0
		}
		size += len(st.body) + 1
	}
	if start < len(steps) {
		chunks = append(chunks, steps[start:])
	}
	return chunks
}

// planChunk sends one plan and sets each step's change, or the refusal
// its write would get.
func planChunk(ctx context.Context, c *adminClient, chunk []step) error {
	body := struct {
		Registrations []json.RawMessage `json:"registrations"`
	}{make([]json.RawMessage, len(chunk))}
	for i, st := range chunk {
		body.Registrations[i] = st.body
	}
	data, err := c.call(ctx, http.MethodPost, "/v1/plan", body, nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return fmt.Errorf("the admin API at %s has no /v1/plan: the bridge is older than bridge apply; upgrade it", c.base)
	}
	if err != nil {
		return err
	}
	var plan admin.Plan
	if err := decodeAnswer(data, &plan); err != nil {
		return err
	}
	if len(plan.Registrations) != len(chunk) {
		return fmt.Errorf("the admin API planned %d registrations of the %d sent", len(plan.Registrations), len(chunk))
	}
	for i, e := range plan.Registrations {
		switch {
		case e.Error != nil:
			chunk[i].err = &apiError{Status: e.Error.Status, Code: e.Error.Code, Message: e.Error.Message}
		case e.Change != changeCreate && e.Change != changeUpdate && e.Change != changeUnchanged:
			return fmt.Errorf("the admin API planned %q for registration %q, a change this client does not know", e.Change, chunk[i].id)
		default:
			chunk[i].change = e.Change
		}
	}
	return nil
}

// writeAll makes the planned changes, applyConcurrency at once. A
// refusal of the API (another client got there first) is kept in its
// step; any other failure (the API out of reach) stops them all.
func writeAll(ctx context.Context, c *adminClient, steps []step) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(applyConcurrency)
	for i := range steps {
		g.Go(func() error {
			err := write(ctx, c, &steps[i])
			var refused *apiError
			if errors.As(err, &refused) {
				steps[i].err, err = refused, nil
			}
			return err
		})
	}
	return g.Wait()
}

// write makes one planned change.
func write(ctx context.Context, c *adminClient, st *step) error {
	var err error
	switch st.change {
	case changeCreate:
		_, err = c.call(ctx, http.MethodPost, "/v1/registrations", st.body, nil)
	case changeUpdate:
		var h http.Header
		if h, _, err = c.exchange(ctx, http.MethodPut, registrationPath(st.id), st.body, nil); err == nil && h.Get("Bridge-Change") == changeUnchanged {
			st.change = changeUnchanged // another writer got there first
		}
	case changeDelete:
		_, err = c.call(ctx, http.MethodDelete, registrationPath(st.id), nil, nil)
	}
	return err
}

// refused reports every step the API refused, in the file's order, and
// then summary with the count and total; nil when none was.
func (s *session) refused(steps []step, summary string, total int) error {
	n := 0
	for _, st := range steps {
		if st.err != nil {
			n++
			where := ""
			if st.line > 0 {
				where = fmt.Sprintf(" (line %d)", st.line)
			}
			fmt.Fprintf(s.errOut, "bridge %s: registration %q%s: %v\n", s.cmd.name, st.id, where, st.err)
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf(summary, n, total)
}

// changes counts the steps that write.
func changes(steps []step) int {
	n := 0
	for _, st := range steps {
		if st.change != changeUnchanged {
			n++
		}
	}
	return n
}

// printPlan prints one line per registration: its mark, its change, its
// id; with --json, {"dryRun", "registrations": [{"id", "change"}]}. A
// change that failed is left out: refused names it.
func (s *session) printPlan(steps []step, dry, asJSON bool) error {
	type line struct {
		ID     string `json:"id"`
		Change string `json:"change"`
	}
	out := struct {
		DryRun        bool   `json:"dryRun"`
		Registrations []line `json:"registrations"`
	}{DryRun: dry, Registrations: make([]line, 0, len(steps))}
	for _, st := range steps {
		if st.err == nil {
			out.Registrations = append(out.Registrations, line{st.id, st.change})
		}
	}
	if asJSON {
		return json.NewEncoder(s.out).Encode(out)
	}
	for _, l := range out.Registrations {
		if _, err := fmt.Fprintf(s.out, "%s %s %s\n", mark(l.Change), l.Change, l.ID); err != nil {
			return err
		}
	}
	return nil
}
