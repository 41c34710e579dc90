package admin

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/projection"
)

// oauth2Request is the oauth2 member of a create or replace.
type oauth2Request struct {
	TokenURL     string   `json:"tokenUrl"`
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret"`
	Scopes       []string `json:"scopes"`
	Audience     string   `json:"audience"`
}

// OAuth2 is a registration's client-credentials grant as answers show it:
// everything but the client secret.
type OAuth2 struct {
	TokenURL string   `json:"tokenUrl"`
	ClientID string   `json:"clientId"`
	Scopes   []string `json:"scopes,omitempty"`
	Audience string   `json:"audience,omitempty"`
}

func oauth2View(o *cursor.OAuth2) *OAuth2 {
	if o == nil {
		return nil
	}
	return &OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, Scopes: o.Scopes, Audience: o.Audience}
}

// validOAuth2 checks what needs no DNS. Its messages name the field and
// never quote the client secret; withAuthentication says the request also
// sets authentication, which would fight over the Authorization header.
func validOAuth2(o *oauth2Request, withAuthentication bool) (*cursor.OAuth2, error) {
	if o == nil {
		return nil, nil
	}
	switch {
	case withAuthentication:
		return nil, invalid("oauth2 and authentication cannot be used together: both set the Authorization header")
	case o.TokenURL == "":
		return nil, invalid("oauth2.tokenUrl is required")
	case o.ClientID == "":
		return nil, invalid("oauth2.clientId is required")
	case hasControl(o.ClientID):
		return nil, invalid("oauth2.clientId must not contain control characters")
	case o.ClientSecret == "":
		return nil, invalid("oauth2.clientSecret is required")
	case hasControl(o.ClientSecret):
		return nil, invalid("oauth2.clientSecret must not contain control characters")
	case hasControl(o.Audience):
		return nil, invalid("oauth2.audience must not contain control characters")
	}
	if err := validTokenURL(o.TokenURL); err != nil {
		return nil, err
	}
	for i, sc := range o.Scopes {
		if !validScope(sc) {
			return nil, invalid(`oauth2.scopes[%d] %q is not a scope token: printable ASCII without spaces, '"' or '\'`, i, sc)
		}
	}
	return &cursor.OAuth2{
		TokenURL:     o.TokenURL,
		ClientID:     o.ClientID,
		ClientSecret: o.ClientSecret,
		Scopes:       o.Scopes,
		Audience:     o.Audience,
	}, nil
}

// validTokenURL refuses what no guard should have to judge, as validURL
// does for the webhook URL, and a fragment, which RFC 6749 §3.2 forbids.
func validTokenURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return invalid("oauth2.tokenUrl is not a valid URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return invalid("oauth2.tokenUrl must be an absolute https:// or http:// URL")
	case u.User != nil:
		return invalid("oauth2.tokenUrl must not carry userinfo; the client authenticates with clientId and clientSecret")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return invalid("oauth2.tokenUrl must not have a fragment")
	}
	return nil
}

// validScope reports whether s is an RFC 6749 scope-token:
// %x21 / %x23-5B / %x5D-7E.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x21 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

// checkTokenURL applies the webhook URL's guard to the token URL: the
// bridge sends the client secret there, so for a2a it must be https and
// public like the receiver.
func (s *server) checkTokenURL(ctx context.Context, ns projection.Namespace, o *cursor.OAuth2) error {
	if o == nil {
		return nil
	}
	err := s.guard.CheckURL(ctx, ns, o.TokenURL)
	if err == nil {
		return nil
	}
	// The guard speaks of "url"; the message is about the token URL.
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "url "); ok {
		return invalid("oauth2.tokenUrl %s", rest)
	}
	return invalid("oauth2.tokenUrl: %s", msg)
}
