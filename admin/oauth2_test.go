package admin

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/jetstream-bridge/bridge/netguard"
)

const oauth2Secret = "CLIENT-SECRET-distinctive-5521"

func withOAuth2(ns, oauth2 string) string {
	target := `"namespace":"outbox","subject":"journal.x"`
	if ns == "a2a" {
		target = `"namespace":"a2a","taskId":"t"`
	}
	return `{"id":"o2",` + target + `,"url":"https://93.184.216.34/hook","oauth2":` + oauth2 + `}`
}

func TestOAuth2ShownWithoutClientSecret(t *testing.T) {
	h := newHarness(t)
	grant := `{"tokenUrl":"https://auth.example/token","clientId":"bridge","clientSecret":"` + oauth2Secret +
		`","scopes":["events:write","events:read"],"audience":"https://hooks.example"}`
	want := &OAuth2{TokenURL: "https://auth.example/token", ClientID: "bridge",
		Scopes: []string{"events:write", "events:read"}, Audience: "https://hooks.example"}

	answers := []response{h.do("POST", "/v1/registrations", withOAuth2("outbox", grant))}
	if answers[0].status != http.StatusCreated {
		t.Fatalf("create: %d %s", answers[0].status, answers[0].body)
	}
	answers = append(answers,
		h.do("GET", "/v1/registrations/o2", ""),
		h.do("PUT", "/v1/registrations/o2", withOAuth2("outbox", grant)),
		h.do("GET", "/v1/registrations", ""))
	for i, res := range answers[:3] {
		if got := decodeView(t, res.body).OAuth2; !reflect.DeepEqual(got, want) {
			t.Errorf("answer %d shows oauth2 %+v, want %+v", i, got, want)
		}
	}
	for _, res := range answers {
		if strings.Contains(string(res.body), "distinctive") || strings.Contains(string(res.body), "clientSecret") {
			t.Fatalf("an answer shows the client secret: %s", res.body)
		}
	}
	if strings.Contains(h.logs.String(), "distinctive") {
		t.Fatalf("a log line shows the client secret:\n%s", h.logs.String())
	}
	reg, err := h.store.Get(t.Context(), "o2")
	if err != nil || reg.OAuth2 == nil || reg.OAuth2.ClientSecret != oauth2Secret {
		t.Fatalf("stored oauth2 %+v (%v), want the client secret kept for the sender", reg.OAuth2, err)
	}
}

func TestOAuth2Refused(t *testing.T) {
	h := newHarness(t)
	grant := func(tokenURL, clientID, secret, more string) string {
		return `{"tokenUrl":"` + tokenURL + `","clientId":"` + clientID + `","clientSecret":"` + secret + `"` + more + `}`
	}
	ok := "https://auth.example/token"
	for _, c := range []struct {
		name, ns, oauth2, want string
	}{
		{"no tokenUrl", "outbox", grant("", "bridge", oauth2Secret, ""), "oauth2.tokenUrl is required"},
		{"no clientId", "outbox", grant(ok, "", oauth2Secret, ""), "oauth2.clientId is required"},
		{"no clientSecret", "outbox", grant(ok, "bridge", "", ""), "oauth2.clientSecret is required"},
		{"control in clientSecret", "outbox", grant(ok, "bridge", oauth2Secret+`\n`, ""), "oauth2.clientSecret must not contain control characters"},
		{"relative tokenUrl", "outbox", grant("/token", "bridge", oauth2Secret, ""), "oauth2.tokenUrl must be an absolute https:// or http:// URL"},
		{"ftp tokenUrl", "outbox", grant("ftp://auth.example/token", "bridge", oauth2Secret, ""), "oauth2.tokenUrl must be an absolute"},
		{"userinfo", "outbox", grant("https://bridge:"+oauth2Secret+"@auth.example/token", "bridge", oauth2Secret, ""), "oauth2.tokenUrl must not carry userinfo"},
		{"fragment", "outbox", grant(ok+"#x", "bridge", oauth2Secret, ""), "oauth2.tokenUrl must not have a fragment"},
		{"unparsable", "outbox", grant("https://auth.example/%zz", "bridge", oauth2Secret, ""), "oauth2.tokenUrl is not a valid URL"},
		{"scope with a space", "outbox", grant(ok, "bridge", oauth2Secret, `,"scopes":["a b"]`), `oauth2.scopes[0] "a b" is not a scope token`},
		{"empty scope", "outbox", grant(ok, "bridge", oauth2Secret, `,"scopes":["a",""]`), `oauth2.scopes[1] "" is not a scope token`},
		{"control in audience", "outbox", grant(ok, "bridge", oauth2Secret, `,"audience":"a\u0007"`), "oauth2.audience must not contain control characters"},
		{"guard refuses the host", "outbox", grant("https://refused.example/token", "bridge", oauth2Secret, ""), `oauth2.tokenUrl host "refused.example" is not granted`},
		{"a2a over http", "a2a", grant("http://auth.example/token", "bridge", oauth2Secret, ""), "oauth2.tokenUrl must use https for a2a registrations"},
		{"unknown member", "outbox", grant(ok, "bridge", oauth2Secret, `,"clientSecrets":"x"`), "clientSecrets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := h.do("POST", "/v1/registrations", withOAuth2(c.ns, c.oauth2))
			wantError(t, res, http.StatusBadRequest, "invalid_argument", c.want)
			if strings.Contains(string(res.body), "distinctive") {
				t.Fatalf("the refusal shows the client secret: %s", res.body)
			}
		})
	}
	body := strings.Replace(withOAuth2("outbox", grant(ok, "bridge", oauth2Secret, "")), `"oauth2"`,
		`"authentication":{"scheme":"Bearer","credentials":"c"},"oauth2"`, 1)
	wantError(t, h.do("POST", "/v1/registrations", body), http.StatusBadRequest, "invalid_argument",
		"oauth2 and authentication cannot be used together")
	body = strings.Replace(withOAuth2("outbox", grant(ok, "bridge", oauth2Secret, "")), `"oauth2"`,
		`"headers":{"Authorization":"Bearer x"},"oauth2"`, 1)
	wantError(t, h.do("POST", "/v1/registrations", body), http.StatusBadRequest, "invalid_argument",
		`headers: "Authorization" is set by the bridge from authentication or oauth2`)
	if strings.Contains(h.logs.String(), "distinctive") {
		t.Fatalf("a log line shows the client secret:\n%s", h.logs.String())
	}
}

// TestOAuth2A2ATokenURLMustBePublic runs the real guard: the bridge sends
// the client secret to the token URL, so for a2a it is held to the rules
// of the receiver's URL.
func TestOAuth2A2ATokenURLMustBePublic(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Guard = netguard.NewPolicy() })
	grant := func(tokenURL string) string {
		return `{"tokenUrl":"` + tokenURL + `","clientId":"bridge","clientSecret":"` + oauth2Secret + `"}`
	}
	for tokenURL, want := range map[string]string{
		"https://127.0.0.1/token":       "oauth2.tokenUrl host is a private address 127.0.0.1",
		"https://10.1.2.3:8443/token":   "oauth2.tokenUrl host is a private address 10.1.2.3",
		"https://[::1]/token":           "oauth2.tokenUrl host is a private address ::1",
		"https://169.254.169.254/token": "oauth2.tokenUrl host is a private address 169.254.169.254",
		"https://2130706433/token":      "oauth2.tokenUrl host \"2130706433\" is a non-canonical IPv4 address",
		"http://93.184.216.34/token":    "oauth2.tokenUrl must use https for a2a registrations",
	} {
		wantError(t, h.do("POST", "/v1/registrations", withOAuth2("a2a", grant(tokenURL))), http.StatusBadRequest, "invalid_argument", want)
	}
	h.create(withOAuth2("a2a", grant("https://93.184.216.34/token")))
	// The outbox namespace reaches operators' own networks, token
	// endpoints included.
	h.create(strings.Replace(withOAuth2("outbox", grant("http://127.0.0.1:9/token")), `"o2"`, `"o3"`, 1))
}
