package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jetstream-bridge/bridge/admin"
)

const tokenSynopsis = "create --name N --id-prefix P --role viewer|operator [--expires RFC3339|DURATION] [--json] | list [--json] | revoke [--json] NAME"

// cmdToken manages the scoped access tokens of the admin API, with the
// root token: create prints the new token once, on stdout alone, so a
// script can take it (TOKEN=$(bridge token create ...)); the bridge keeps
// only its hash and cannot show it again.
func cmdToken(ctx context.Context, s *session, args []string) error {
	if len(args) == 0 {
		return usagef("missing create, list or revoke")
	}
	switch args[0] {
	case "create":
		return tokenCreate(ctx, s, args[1:])
	case "list":
		return tokenList(ctx, s, args[1:])
	case "revoke":
		return tokenRevoke(ctx, s, args[1:])
	case "-h", "-help", "--help":
		return s.parse(s.flags(), []string{"-h"})
	}
	return usagef("unknown token subcommand %q: create, list or revoke", args[0])
}

type tokenBody struct {
	Name      string `json:"name"`
	IDPrefix  string `json:"idPrefix"`
	Role      string `json:"role"`
	ExpiresAt string `json:"expiresAt,omitempty"`
}

func tokenCreate(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	var body tokenBody
	fs.StringVar(&body.Name, "name", "", "the token's name, shown in the audit trail: letters, digits, '.', '_' and '-'")
	fs.StringVar(&body.IDPrefix, "id-prefix", "", "the start of every registration id the token reaches (empty: every registration)")
	fs.StringVar(&body.Role, "role", "", "viewer (reads only) or operator (also creates, changes, deletes, unparks, rewinds, resends)")
	expires := fs.String("expires", "", "when the token stops working: an RFC 3339 time, or a duration from now such as 720h (default: never)")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	switch {
	case body.Name == "":
		return usagef("--name is required")
	case body.Role == "":
		return usagef("--role is required: viewer or operator")
	case !isSet(fs, "id-prefix"):
		return usagef("--id-prefix is required (--id-prefix '' reaches every registration)")
	}
	if *expires != "" {
		at, err := expiry(*expires, time.Now())
		if err != nil {
			return err
		}
		body.ExpiresAt = at.Format(time.RFC3339)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	data, err := c.call(ctx, "POST", "/v1/tokens", body, nil)
	if err != nil {
		return err
	}
	if cf.json {
		_, err := s.out.Write(data)
		return err
	}
	var tok admin.Token
	if err := decodeAnswer(data, &tok); err != nil {
		return err
	}
	fmt.Fprintf(s.errOut, "created token %s: %s; it is shown only now, keep it\n", tok.Name, describeToken(tok))
	fmt.Fprintln(s.out, tok.Secret)
	return nil
}

// expiry reads --expires: an RFC 3339 time, or a duration from now.
func expiry(raw string, now time.Time) (time.Time, error) {
	if at, err := time.Parse(time.RFC3339, raw); err == nil {
		return at, nil
	}
	if d, err := time.ParseDuration(raw); err == nil && d > 0 {
		return now.Add(d).UTC().Truncate(time.Second), nil
	}
	return time.Time{}, usagef("--expires must be an RFC 3339 time or a positive duration such as 720h, not %q", raw)
}

// describeToken says what a token reaches, in words.
func describeToken(t admin.Token) string {
	scope := fmt.Sprintf("ids starting with %q", t.IDPrefix)
	if t.IDPrefix == "" {
		scope = "every registration"
	}
	exp := "never expires"
	if t.ExpiresAt != nil {
		exp = "expires " + t.ExpiresAt.Format(time.RFC3339)
	}
	return fmt.Sprintf("%s of %s, %s", t.Role, scope, exp)
}

func tokenList(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	data, err := c.call(ctx, "GET", "/v1/tokens", nil, nil)
	if err != nil {
		return err
	}
	if cf.json {
		_, err := s.out.Write(data)
		return err
	}
	var list admin.TokenList
	if err := decodeAnswer(data, &list); err != nil {
		return err
	}
	w := newTable(s.out)
	fmt.Fprintln(w, "NAME\tROLE\tID PREFIX\tCREATED\tEXPIRES")
	for _, t := range list.Tokens {
		exp := "never"
		if t.ExpiresAt != nil {
			exp = t.ExpiresAt.Format(time.RFC3339)
		}
		prefix := t.IDPrefix
		if prefix == "" {
			prefix = "(all)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, prefix, t.CreatedAt.Format(time.RFC3339), exp)
	}
	return w.Flush()
}

func tokenRevoke(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	cf := addClientFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	pos, err := positional(fs, "NAME")
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if _, err := c.call(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(pos[0]), nil, nil); err != nil {
		return err
	}
	if !cf.json { // the API answers 204: there is no JSON to print
		fmt.Fprintf(s.out, "revoked %s\n", pos[0])
	}
	return nil
}
