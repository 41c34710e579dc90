package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/url"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
)

const (
	maxIDLen = 128
	// a2aSubjectPrefix is where an A2A task's events live in the journal
	// unless the registration names another filter.
	a2aSubjectPrefix = "journal.a2a."
	formatBinary     = "binary"
	formatStructured = "structured"
	// secretPrefix marks a Standard Webhooks signing key.
	secretPrefix = "whsec_"
	// Standard Webhooks keys are 24 to 64 random bytes: fewer is guessable,
	// more is a sign of a value pasted from elsewhere.
	minSecretBytes, maxSecretBytes = 24, 64
)

// registrationRequest is the body of a create or replace. Every field the
// API accepts is here, so DisallowUnknownFields catches a misspelt one.
type registrationRequest struct {
	ID              string       `json:"id"`
	Namespace       string       `json:"namespace"`
	Subject         string       `json:"subject"`
	TaskID          string       `json:"taskId"`
	URL             string       `json:"url"`
	Format          string       `json:"format"`
	DataContentType string       `json:"dataContentType"`
	Secret          string       `json:"secret"`
	Token           string       `json:"token"`
	Authentication  *authRequest `json:"authentication"`
	// OAuth2 is the client-credentials grant (oauth2.go).
	OAuth2 *oauth2Request `json:"oauth2"`
	// Start is "new", "first", {"seq": N} or {"time": "RFC3339"}; it is
	// parsed on its own because it is either a string or an object.
	Start json.RawMessage `json:"start"`
	Batch *batchRequest   `json:"batch"`
	// Ordering is outbox only (ordering.go).
	Ordering *orderingRequest `json:"ordering"`
	// Filter is outbox only: a CEL expression (filter.go).
	Filter string `json:"filter"`
	// Receiver options, either namespace (options.go).
	Headers   map[string]string `json:"headers"`
	TLS       *cursor.TLS       `json:"tls"`
	RateLimit *rateLimitRequest `json:"rateLimit"`
}

type authRequest struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials"`
}

// batchRequest uses pointers so an explicit zero is told apart from an
// absent field: zero is refused, absent takes the worker's default.
type batchRequest struct {
	MaxEvents *int    `json:"maxEvents"`
	MaxBytes  *int    `json:"maxBytes"`
	MaxDelay  *string `json:"maxDelay"`
}

// validConfig checks req and builds the Config it asks for. It checks
// everything cheap first; the URL guard, which may resolve a name, last.
func (s *server) validConfig(ctx context.Context, req *registrationRequest) (cursor.Config, error) {
	c := cursor.Config{
		ID:              req.ID,
		Namespace:       req.Namespace,
		TaskID:          req.TaskID,
		URL:             req.URL,
		Secret:          req.Secret,
		Token:           req.Token,
		DataContentType: req.DataContentType,
	}
	if err := validID(c.ID); err != nil {
		return c, err
	}
	ns := projection.Namespace(c.Namespace)
	var err error
	switch {
	case c.Namespace == "":
		return c, invalid("namespace is required: outbox or a2a")
	case !ns.Valid():
		return c, invalid("namespace must be outbox or a2a, not %q", c.Namespace)
	case ns == projection.Outbox:
		err = outboxConfig(&c, req)
	default:
		err = a2aConfig(&c, req)
	}
	if err != nil {
		return c, err
	}
	if err := commonConfig(&c, req); err != nil {
		return c, err
	}
	if c.OAuth2, err = validOAuth2(req.OAuth2, c.AuthScheme != ""); err != nil {
		return c, err
	}
	// After whatever sets authentication or oauth2: they decide whether
	// an Authorization header is the registration's to set.
	if err := receiverOptions(&c, req); err != nil {
		return c, err
	}
	// The guard's message is shown as it is: it already names the url and
	// the rule, and never the URL's credentials.
	if err := s.guard.CheckURL(ctx, ns, c.URL); err != nil {
		return c, invalid("%v", err)
	}
	if err := s.checkTokenURL(ctx, ns, c.OAuth2); err != nil {
		return c, err
	}
	return c, nil
}

// validID accepts [A-Za-z0-9._-]{0,128} (empty: generated later), except
// "." and "..", which no URL path can carry as a segment.
func validID(id string) error {
	switch {
	case len(id) > maxIDLen:
		return invalid("id must be at most %d characters, not %d", maxIDLen, len(id))
	case id == "." || id == "..":
		return invalid("id must not be %q: it cannot be a URL path segment", id)
	}
	for i := 0; i < len(id); i++ {
		if !isIDByte(id[i]) {
			return invalid("id %q may contain only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}

func isIDByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '.' || b == '_' || b == '-'
}

func outboxConfig(c *cursor.Config, req *registrationRequest) error {
	switch {
	case req.TaskID != "":
		return invalid("taskId applies to a2a registrations only")
	case req.Token != "":
		return invalid("token applies to a2a registrations only; use authentication for outbox")
	case req.Subject == "":
		return invalid("subject is required for outbox registrations")
	}
	if err := validFilter(req.Subject); err != nil {
		return err
	}
	c.Subject = req.Subject
	switch req.Format {
	case "", formatBinary:
		c.Format = formatBinary
	case formatStructured:
		c.Format = formatStructured
	default:
		return invalid("format must be binary or structured, not %q", req.Format)
	}
	if req.DataContentType != "" {
		if _, _, err := mime.ParseMediaType(req.DataContentType); err != nil {
			return invalid("dataContentType %q is not a media type: %v", req.DataContentType, err)
		}
	}
	batch, err := validBatch(req.Batch)
	if err != nil {
		return err
	}
	c.Batch = batch
	if err := validMessageFilter(c, req.Filter); err != nil {
		return err
	}
	return validOrdering(c, req.Ordering)
}

func a2aConfig(c *cursor.Config, req *registrationRequest) error {
	switch {
	case req.Format != "":
		return invalid("format applies to outbox registrations only")
	case req.DataContentType != "":
		return invalid("dataContentType applies to outbox registrations only")
	case req.Batch != nil:
		return invalid("batch applies to outbox registrations only")
	case req.Ordering != nil:
		return invalid("ordering applies to outbox registrations only: a task's events are one sequence")
	case req.Filter != "":
		return invalid("filter applies to outbox registrations only: a task's events are one sequence")
	case req.TaskID == "":
		return invalid("taskId is required for a2a registrations")
	}
	if !validToken(req.TaskID) {
		return invalid("taskId %q must be one subject token: no '.', '*', '>' or whitespace", req.TaskID)
	}
	c.Subject = req.Subject
	if c.Subject == "" {
		c.Subject = a2aSubjectPrefix + req.TaskID
	}
	return validFilter(c.Subject)
}

// commonConfig checks what both namespaces accept. Its messages never
// quote the value they refuse: every field here is a secret.
func commonConfig(c *cursor.Config, req *registrationRequest) error {
	if err := validURL(req.URL); err != nil {
		return err
	}
	if req.Secret != "" && !validSecret(req.Secret) {
		return invalid("secret must be %q followed by the base64 of a %d to %d byte key",
			secretPrefix, minSecretBytes, maxSecretBytes)
	}
	if hasControl(req.Token) {
		return invalid("token must not contain control characters")
	}
	if a := req.Authentication; a != nil {
		switch {
		case !isHTTPToken(a.Scheme):
			return invalid("authentication.scheme must be an HTTP auth scheme such as Bearer")
		case a.Credentials == "":
			return invalid("authentication.credentials is required with authentication.scheme")
		case hasControl(a.Credentials):
			return invalid("authentication.credentials must not contain control characters")
		}
		c.AuthScheme, c.AuthCredentials = a.Scheme, a.Credentials
	}
	return nil
}

// validURL refuses what no guard should have to judge: an empty URL, one
// that does not parse, and one with userinfo — a password there would be
// echoed by every answer that shows the URL.
func validURL(raw string) error {
	if raw == "" {
		return invalid("url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return invalid("url is not a valid URL: %v", err)
	}
	if u.User != nil {
		return invalid("url must not carry userinfo; put credentials in authentication")
	}
	return nil
}

func validBatch(b *batchRequest) (*cursor.Batch, error) {
	if b == nil {
		return nil, nil
	}
	var out cursor.Batch
	if b.MaxEvents != nil {
		if *b.MaxEvents <= 0 {
			return nil, invalid("batch.maxEvents must be positive, not %d", *b.MaxEvents)
		}
		out.MaxEvents = *b.MaxEvents
	}
	if b.MaxBytes != nil {
		if *b.MaxBytes <= 0 {
			return nil, invalid("batch.maxBytes must be positive, not %d", *b.MaxBytes)
		}
		out.MaxBytes = *b.MaxBytes
	}
	if b.MaxDelay != nil {
		d, err := time.ParseDuration(*b.MaxDelay)
		if err != nil || d <= 0 {
			return nil, invalid("batch.maxDelay must be a positive Go duration such as 50ms, not %q", *b.MaxDelay)
		}
		out.MaxDelay = d
	}
	return &out, nil
}

// validFilter accepts a NATS subject filter: non-empty tokens separated by
// dots, no whitespace, '*' only as a whole token, '>' only as the whole
// last token. The server would refuse anything else at read time, long
// after the caller is gone.
func validFilter(f string) error {
	if f == "" {
		return invalid("subject must not be empty")
	}
	tokens := strings.Split(f, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return invalid("subject %q has an empty token", f)
		case tok == "*":
		case tok == ">":
			if i != len(tokens)-1 {
				return invalid("subject %q may use '>' only as its last token", f)
			}
		case strings.ContainsAny(tok, "*>"):
			return invalid("subject %q may use '*' and '>' only as whole tokens", f)
		case strings.ContainsFunc(tok, isSpaceOrControl):
			return invalid("subject %q must not contain whitespace or control characters", f)
		}
	}
	return nil
}

// validToken reports whether t can be one literal subject token.
func validToken(t string) bool {
	return t != "" && !strings.ContainsAny(t, ".*>") && !strings.ContainsFunc(t, isSpaceOrControl)
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f })
}

// validSecret accepts a Standard Webhooks key: "whsec_" and the standard
// base64 of 24 to 64 bytes.
func validSecret(secret string) bool {
	raw, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	return err == nil && len(key) >= minSecretBytes && len(key) <= maxSecretBytes
}

// isHTTPToken reports whether s is an RFC 9110 token, the grammar of an
// authentication scheme.
func isHTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(isIDByte(b) || strings.IndexByte("!#$%&'*+^`|~", b) >= 0) {
			return false
		}
	}
	return true
}
