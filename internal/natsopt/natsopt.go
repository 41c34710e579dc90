// Package natsopt turns the usual NATS client security settings into
// nats.go options, and keeps credentials out of what is printed, for the
// daemon and the commands that connect to NATS alike.
package natsopt

import (
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// Security is the client security of a NATS connection: a credentials
// file, an nkey seed file, a user and password, a CA to trust and a
// client certificate with its key. Empty fields are not used.
type Security struct {
	Creds, Nkey, User, Password string
	TLSCA, TLSCert, TLSKey      string
}

// Options returns the nats.go options of s. Its one error is an nkey seed
// file that does not load; the caller names the setting. A TLSCert
// without its TLSKey (or the reverse) is the caller's to refuse first.
func (s Security) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if s.Creds != "" {
		opts = append(opts, nats.UserCredentials(s.Creds))
	}
	if s.Nkey != "" {
		o, err := nats.NkeyOptionFromSeed(s.Nkey)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	if s.User != "" || s.Password != "" {
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	}
	if s.TLSCA != "" {
		opts = append(opts, nats.RootCAs(s.TLSCA))
	}
	if s.TLSCert != "" && s.TLSKey != "" {
		opts = append(opts, nats.ClientCert(s.TLSCert, s.TLSKey))
	}
	return opts, nil
}

// RedactURLs drops the userinfo of every URL in a comma-separated server
// list: nats://user:password@host and nats://token@host carry credentials.
func RedactURLs(servers string) string {
	list := strings.Split(servers, ",")
	for i, s := range list {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			u.User = nil
			list[i] = u.String()
		} else if err != nil && strings.Contains(s, "@") {
			list[i] = "(unparsable server URL)"
		}
	}
	return strings.Join(list, ",")
}
