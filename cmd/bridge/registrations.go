package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/admin"
)

const registerSynopsis = "[--id ID] --namespace outbox|a2a (--subject F | --task-id T) --url URL " +
	"[--format binary|structured] [--data-content-type CT] [--secret whsec_...] [--token T] " +
	"[--auth-scheme S --auth-credentials C] [--start new|first|SEQ|RFC3339] " +
	"[--batch-max-events N] [--batch-max-bytes N] [--batch-max-delay D] " +
	"[--order-key KEY [--order-max-in-flight N]] [--filter EXPR] [--idempotency-key K] [--json]"

// authBody is the authentication a create asks for; answers name the
// scheme only (admin.Authentication).
type authBody struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// registerRequest is the create body; empty fields are left out so the
// API's defaults apply.
type registerRequest struct {
	ID              string        `json:"id,omitempty"`
	Namespace       string        `json:"namespace"`
	Subject         string        `json:"subject,omitempty"`
	TaskID          string        `json:"taskId,omitempty"`
	URL             string        `json:"url"`
	Format          string        `json:"format,omitempty"`
	DataContentType string        `json:"dataContentType,omitempty"`
	Secret          string        `json:"secret,omitempty"`
	Token           string        `json:"token,omitempty"`
	Authentication  *authBody     `json:"authentication,omitempty"`
	Start           any           `json:"start,omitempty"`
	Batch           *admin.Batch  `json:"batch,omitempty"`
	Ordering        *orderingBody `json:"ordering,omitempty"`
	Filter          string        `json:"filter,omitempty"`
}

// orderingBody is the ordering a create asks for; an absent maxInFlight
// takes the API's default.
type orderingBody struct {
	Key         string `json:"key"`
	MaxInFlight int    `json:"maxInFlight,omitempty"`
}

func cmdRegister(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	var rf registerFlags
	rf.register(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	req, err := rf.request()
	if err != nil {
		return err
	}
	var header http.Header
	if rf.idemKey != "" {
		header = http.Header{"Idempotency-Key": {rf.idemKey}}
	}
	return s.callRegistration(ctx, cf, "POST", "/v1/registrations", req, header, func(r admin.Registration) {
		fmt.Fprintf(s.out, "registered %s: %s %s -> %s, %s, next sequence %d",
			r.ID, r.Namespace, r.Subject, hostOf(r.URL), r.State, r.NextSeq)
		if r.Ordering != nil {
			fmt.Fprintf(s.out, ", ordered by %s", describeOrdering(*r.Ordering))
		}
		fmt.Fprintln(s.out)
	})
}

// registerFlags are the flags of register, one per field of the create
// body.
type registerFlags struct {
	req            registerRequest
	auth           authBody
	batch          admin.Batch
	ordering       orderingBody
	orderInFlight  bool // --order-max-in-flight was given
	start, idemKey string
}

func (f *registerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.req.ID, "id", "", "registration id (generated when empty)")
	fs.StringVar(&f.req.Namespace, "namespace", "", "outbox or a2a")
	fs.StringVar(&f.req.Subject, "subject", "", "subject filter in the journal stream")
	fs.StringVar(&f.req.TaskID, "task-id", "", "A2A task id (a2a)")
	fs.StringVar(&f.req.URL, "url", "", "webhook URL")
	fs.StringVar(&f.req.Format, "format", "", "binary or structured CloudEvents (outbox; default binary)")
	fs.StringVar(&f.req.DataContentType, "data-content-type", "", "content type for messages without one (outbox)")
	fs.StringVar(&f.req.Secret, "secret", "", "Standard Webhooks signing key, whsec_...")
	fs.StringVar(&f.req.Token, "token", "", "A2A notification token (a2a)")
	fs.StringVar(&f.auth.Scheme, "auth-scheme", "", "Authorization scheme, e.g. Bearer")
	fs.StringVar(&f.auth.Credentials, "auth-credentials", "", "Authorization credentials")
	fs.StringVar(&f.start, "start", "", "new, first, a sequence number or an RFC 3339 time")
	fs.IntVar(&f.batch.MaxEvents, "batch-max-events", 0, "CloudEvents batch mode: events per POST (outbox)")
	fs.IntVar(&f.batch.MaxBytes, "batch-max-bytes", 0, "CloudEvents batch mode: bytes per POST (outbox)")
	fs.StringVar(&f.batch.MaxDelay, "batch-max-delay", "", "CloudEvents batch mode: longest wait, e.g. 50ms (outbox)")
	fs.StringVar(&f.ordering.Key, "order-key", "", "what stays in order: registration, subject, tokens:N[,M...], header:<Name> or none (outbox)")
	fs.Func("order-max-in-flight", "POSTs of the registration at once, 1-256, with --order-key (default 16)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		f.ordering.MaxInFlight, f.orderInFlight = n, true
		return nil
	})
	fs.StringVar(&f.req.Filter, "filter", "", "CEL expression over event, data, headers and subject: only the messages it is true for are delivered (outbox)")
	fs.StringVar(&f.idemKey, "idempotency-key", "", "Idempotency-Key header: a retry with the same key creates nothing new")
}

// request checks what the usage line promises and builds the body; the
// API checks the rest and says what is wrong.
func (f *registerFlags) request() (registerRequest, error) {
	req := f.req
	switch {
	case req.Namespace == "":
		return req, usagef("--namespace is required")
	case req.URL == "":
		return req, usagef("--url is required")
	case req.Subject == "" && req.TaskID == "":
		return req, usagef("--subject or --task-id is required")
	case (f.auth.Scheme == "") != (f.auth.Credentials == ""):
		return req, usagef("--auth-scheme and --auth-credentials go together")
	case f.orderInFlight && f.ordering.Key == "":
		return req, usagef("--order-max-in-flight needs --order-key")
	}
	if f.ordering.Key != "" {
		req.Ordering = &f.ordering
	}
	if f.auth.Scheme != "" {
		req.Authentication = &f.auth
	}
	if f.batch != (admin.Batch{}) {
		req.Batch = &f.batch
	}
	var err error
	req.Start, err = parseStart(f.start)
	return req, err
}

// parseStart reads --start: a word, a sequence or a time.
func parseStart(v string) (any, error) {
	switch v {
	case "":
		return nil, nil
	case "new", "first":
		return v, nil
	}
	if seq, err := strconv.ParseUint(v, 10, 64); err == nil {
		return map[string]uint64{"seq": seq}, nil
	}
	if _, err := time.Parse(time.RFC3339, v); err == nil {
		return map[string]string{"time": v}, nil
	}
	return nil, usagef("--start must be new, first, a sequence number or an RFC 3339 time, not %q", v)
}

func cmdShow(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	id, err := s.parseID(fs, args)
	if err != nil {
		return err
	}
	return s.callRegistration(ctx, cf, "GET", registrationPath(id), nil, nil, s.printRegistration)
}

func cmdDelete(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	id, err := s.parseID(fs, args)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if _, err := c.call(ctx, "DELETE", registrationPath(id), nil, nil); err != nil {
		return err
	}
	if !cf.json { // the API answers 204: there is no JSON to print
		fmt.Fprintf(s.out, "deleted %s\n", id)
	}
	return nil
}

func cmdUnpark(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	id, err := s.parseID(fs, args)
	if err != nil {
		return err
	}
	return s.callRegistration(ctx, cf, "POST", registrationPath(id)+"/unpark", nil, nil, func(r admin.Registration) {
		fmt.Fprintf(s.out, "unparked %s: %s, next sequence %d\n", r.ID, r.State, r.NextSeq)
	})
}

func cmdRewind(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	seq := fs.Uint64("seq", 0, "the sequence to deliver next")
	at := fs.String("time", "", "deliver next the first message stored at or after this RFC 3339 time")
	id, err := s.parseID(fs, args)
	if err != nil {
		return err
	}
	var body any
	switch {
	case isSet(fs, "seq") == isSet(fs, "time"):
		return usagef("give exactly one of --seq or --time")
	case isSet(fs, "seq"):
		body = map[string]uint64{"seq": *seq}
	default:
		if _, err := time.Parse(time.RFC3339, *at); err != nil {
			return usagef("--time must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", *at)
		}
		body = map[string]string{"time": *at}
	}
	return s.callRegistration(ctx, cf, "POST", registrationPath(id)+"/rewind", body, nil, func(r admin.Registration) {
		fmt.Fprintf(s.out, "rewound %s: next sequence %d, %s\n", r.ID, r.NextSeq, r.State)
		if r.State == "parked" {
			fmt.Fprintf(s.out, "still parked: run 'bridge unpark %s' to resume delivery\n", r.ID)
		}
	})
}

// parseID parses the flags and the one positional ID.
func (s *session) parseID(fs *flag.FlagSet, args []string) (string, error) {
	if err := s.parse(fs, args); err != nil {
		return "", err
	}
	pos, err := positional(fs, "ID")
	if err != nil {
		return "", err
	}
	return pos[0], nil
}

// callRegistration makes a call answered by one registration and prints
// it: the answer itself with --json, else through human.
func (s *session) callRegistration(ctx context.Context, cf *clientFlags, method, path string, body any, header http.Header, human func(admin.Registration)) error {
	c, err := cf.client()
	if err != nil {
		return err
	}
	data, err := c.call(ctx, method, path, body, header)
	if err != nil {
		return err
	}
	if cf.json {
		_, err := s.out.Write(data)
		return err
	}
	var r admin.Registration
	if err := decodeAnswer(data, &r); err != nil {
		return err
	}
	human(r)
	return nil
}

func registrationPath(id string) string { return "/v1/registrations/" + url.PathEscape(id) }

// isSet reports whether the flag was set, on the command line or from
// the environment.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// hostOf is the host of a URL, for output that must stay short.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

// printRegistration prints every field of a registration, one per line.
func (s *session) printRegistration(r admin.Registration) {
	w := newTable(s.out)
	row := func(k string, v any) { fmt.Fprintf(w, "%s:\t%v\n", k, v) }
	row("id", r.ID)
	row("namespace", r.Namespace)
	row("subject", r.Subject)
	if r.TaskID != "" {
		row("task id", r.TaskID)
	}
	row("url", r.URL)
	if r.Format != "" {
		row("format", r.Format)
	}
	if r.DataContentType != "" {
		row("data content type", r.DataContentType)
	}
	if r.Batch != nil {
		row("batch", describeBatch(*r.Batch))
	}
	row("signed", yesNo(r.Signed))
	if r.Namespace == "a2a" {
		row("token", yesNo(r.HasToken))
	}
	if r.Authentication != nil {
		row("authentication", r.Authentication.Scheme)
	}
	if r.Ordering != nil {
		row("ordering", describeOrdering(*r.Ordering))
	}
	row("state", r.State)
	row("next sequence", r.NextSeq)
	row("attempts", r.Attempts)
	row("next attempt at", timeOrDash(r.NextAttemptAt))
	row("last error", orDash(r.LastError))
	row("delivered", r.Delivered)
	if r.Filter != "" || r.Filtered > 0 || r.FilterErrors > 0 {
		row("filter", orDash(r.Filter))
		row("filtered", r.Filtered)
		row("filter errors", r.FilterErrors)
		row("last filter error", orDash(r.LastFilterError))
	}
	if windowed(r) {
		row("in flight", r.InFlight)
		row("ahead", r.Ahead)
	}
	row("created at", r.CreatedAt.Format(time.RFC3339))
	row("updated at", r.UpdatedAt.Format(time.RFC3339))
	if r.CompletedAt != nil {
		row("completed at", timeOrDash(r.CompletedAt))
	}
	_ = w.Flush()
}

// describeBatch names the batch limits that are set; the rest are the
// daemon's defaults.
func describeBatch(b admin.Batch) string {
	var parts []string
	if b.MaxEvents > 0 {
		parts = append(parts, fmt.Sprintf("max events %d", b.MaxEvents))
	}
	if b.MaxBytes > 0 {
		parts = append(parts, fmt.Sprintf("max bytes %d", b.MaxBytes))
	}
	if b.MaxDelay != "" {
		parts = append(parts, "max delay "+b.MaxDelay)
	}
	if len(parts) == 0 {
		return "on, with the default limits"
	}
	return "on, " + strings.Join(parts, ", ")
}

// describeOrdering says what stays in order and how many POSTs may be in
// flight; the whole registration's order is one POST at a time, whatever
// maxInFlight says.
func describeOrdering(o admin.Ordering) string {
	if o.Key == "registration" {
		return "registration (one POST at a time)"
	}
	return fmt.Sprintf("%s, up to %d in flight", o.Key, o.MaxInFlight)
}

// windowed reports whether r is delivered with ordering keys, or still
// holds messages acknowledged past its cursor from when it was: then
// its POSTs in flight and what is ahead of its cursor are worth showing.
func windowed(r admin.Registration) bool {
	return r.Ordering != nil && r.Ordering.Key != "registration" || r.Ahead > 0
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func cmdPurge(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	olderThan := fs.String("completed-older-than", "", "delete completed registrations older than this Go duration, e.g. 720h")
	batchSize := fs.Int("batch-size", 1000, "rows per transaction")
	maxBatches := fs.Int("max-batches", 0, "stop after this many batches (0: no bound)")
	keyAge := fs.String("idempotency-key-max-age", "24h", `expire idempotency keys older than this, or "none"`)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	if *olderThan == "" {
		return usagef("--completed-older-than is required, e.g. 720h")
	}
	body := map[string]any{"completedOlderThan": *olderThan}
	if isSet(fs, "batch-size") {
		body["batchSize"] = *batchSize
	}
	if isSet(fs, "max-batches") {
		body["maxBatches"] = *maxBatches
	}
	if isSet(fs, "idempotency-key-max-age") {
		body["idempotencyKeyMaxAge"] = *keyAge
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	data, err := c.call(ctx, "POST", "/v1/purge", body, nil)
	if err != nil {
		return err
	}
	if cf.json {
		_, err := s.out.Write(data)
		return err
	}
	var rep struct {
		RegistrationsDeleted   int64 `json:"registrationsDeleted"`
		IdempotencyKeysDeleted int64 `json:"idempotencyKeysDeleted"`
		Batches                int   `json:"batches"`
		Complete               bool  `json:"complete"`
	}
	if err := decodeAnswer(data, &rep); err != nil {
		return err
	}
	rest := "nothing eligible is left"
	if !rep.Complete {
		rest = "more remain: run purge again"
	}
	fmt.Fprintf(s.out, "purged %d completed registrations and %d idempotency keys in %d batches; %s\n",
		rep.RegistrationsDeleted, rep.IdempotencyKeysDeleted, rep.Batches, rest)
	return nil
}

// listAnswer is one page of GET /v1/registrations.
type listAnswer struct {
	Registrations []json.RawMessage `json:"registrations"`
	Next          string            `json:"next"`
}
