package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// v1Route is one /v1 route as a user calls it, with {id} for a
// registration id, and who may call it (CONTRACT §14): "read" any token,
// "write" the root token and operators, "root" the root token alone.
type v1Route struct {
	method, path, body, who string
}

// v1Routes is every /v1 route of CONTRACT §3, §6, §7 and §14. A route the
// bridge adds must be added here with who may call it.
var v1Routes = []v1Route{
	{"POST", "/v1/registrations", `{"id":"{id}","namespace":"outbox","subject":"journal.none","url":"{url}"}`, "write"},
	{"GET", "/v1/registrations", "", "read"},
	{"GET", "/v1/registrations/{id}", "", "read"},
	{"PUT", "/v1/registrations/{id}", `{"namespace":"outbox","subject":"journal.none","url":"{url}"}`, "write"},
	{"DELETE", "/v1/registrations/{id}", "", "write"},
	{"POST", "/v1/registrations/{id}/unpark", "", "write"},
	{"POST", "/v1/registrations/{id}/rewind", `{"seq":1}`, "write"},
	{"GET", "/v1/registrations/{id}/attempts", "", "read"},
	{"POST", "/v1/registrations/{id}/resend", `{"seq":1}`, "write"},
	{"GET", "/v1/attempts?seq=1", "", "read"},
	{"POST", "/v1/plan", `{"registrations":[{"id":"{id}","namespace":"outbox","subject":"journal.none","url":"{url}"}]}`, "write"},
	{"POST", "/v1/purge", `{"completedOlderThan":"1000h"}`, "root"},
	{"GET", "/v1/cluster", "", "root"},
	{"POST", "/v1/tokens", `{"name":"made-in-table","idPrefix":"x-","role":"viewer"}`, "root"},
	{"GET", "/v1/tokens", "", "root"},
	{"DELETE", "/v1/tokens/nobody", "", "root"},
	{"GET", "/v1/whoami", "", "read"},
}

// callAs calls the admin API at addr with token (none when empty).
func callAs(t *testing.T, addr, token, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(withTest(t, req))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// makeToken creates a token with the root token through the CLI and
// returns what it printed on stdout: the token alone.
func makeToken(t *testing.T, d *daemon, name, prefix, role string, extra ...string) string {
	t.Helper()
	args := append([]string{"token", "create", "--admin-url", "http://" + d.admin, "--data-dir", d.dataDir,
		"--name", name, "--id-prefix", prefix, "--role", role}, extra...)
	cmd := exec.Command(bin.bridge, args...)
	cmd.Env = append(os.Environ(), "BRIDGE_ADMIN_TOKEN=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge token create %s: %v\n%s%s", name, err, out.String(), errOut.String())
	}
	tok := strings.TrimSpace(out.String())
	if !strings.HasPrefix(tok, "bst_") || strings.ContainsAny(tok, " \n") {
		t.Fatalf("bridge token create printed %q on stdout, want the token alone", out.String())
	}
	return tok
}

// tokenCLI runs bridge token VERB against d with its root token.
func tokenCLI(t *testing.T, d *daemon, verb string, args ...string) (string, int) {
	t.Helper()
	full := append([]string{"token", verb, "--admin-url", "http://" + d.admin, "--data-dir", d.dataDir}, args...)
	return runBridge(t, []string{"BRIDGE_ADMIN_TOKEN="}, full...)
}

// TestScopedTokens drives CONTRACT §14 through the binary: a viewer and
// an operator of team-a- against team-a- and team-b- registrations on
// every /v1 route, as well as the root token and none; revocation,
// expiry and a restart; and no token anywhere but the creating answer.
func TestScopedTokens(t *testing.T) {
	failing := newSinkAnswering(t, func() int { return 503 })
	ok := newSink(t)
	d := newDaemon(t, "--max-attempts", "1")
	d.start()
	evs := subscribeEvents(t, "nats://"+d.natsAddr, "bridge.events")
	root := d.token()
	pub := newPublisher(t, "nats://"+d.natsAddr)
	pub.publish(t, "journal.orders.1", `{"n":1}`)
	for _, id := range []string{"team-a-1", "team-a-2", "team-b-1", "team-b-2"} {
		body := fmt.Sprintf(`{"id":%q,"namespace":"outbox","subject":"journal.orders.>","url":%q,"start":"first"}`, id, ok.URL+"/"+id)
		if code, b := callAs(t, d.admin, root, "POST", "/v1/registrations", body); code != 201 {
			t.Fatalf("create %s: %d %s", id, code, b)
		}
	}
	waitFor(t, 10*time.Second, "the four registrations to deliver seq 1", func() bool { return len(ok.bodies()) == 4 })

	viewer := makeToken(t, d, "team-a-view", "team-a-", "viewer")
	operator := makeToken(t, d, "team-a-ops", "team-a-", "operator")
	tokens := []string{viewer, operator}

	t.Run("routes", func(t *testing.T) {
		for _, rt := range v1Routes {
			on := func(token, id string) (int, string) {
				p := strings.ReplaceAll(rt.path, "{id}", id)
				b := strings.NewReplacer("{id}", id, "{url}", ok.URL+"/"+id).Replace(rt.body)
				return callAs(t, d.admin, token, rt.method, p, b)
			}
			name := rt.method + " " + rt.path
			if code, b := on("", "team-a-1"); code != 401 {
				t.Errorf("%s without a token: %d %s", name, code, b)
			}
			if code, b := on("bst_revoked-or-never-made", "team-a-1"); code != 401 {
				t.Errorf("%s with an unknown token: %d %s", name, code, b)
			}
			for i, tok := range tokens {
				who := []string{"viewer", "operator"}[i]
				switch {
				case rt.who == "root" || (rt.who == "write" && who == "viewer"):
					for _, id := range []string{"team-a-1", "team-b-1", "team-a-none"} {
						if code, b := on(tok, id); code != 403 {
							t.Errorf("%s by the %s on %s: %d %s, want 403", name, who, id, code, b)
						}
					}
				case rt.method == "POST" && rt.path == "/v1/registrations":
					if code, b := on(tok, "team-b-9"); code != 400 || !strings.Contains(b, `must start with \"team-a-\"`) {
						t.Errorf("%s by the %s of team-b-9: %d %s, want 400 naming the prefix", name, who, code, b)
					}
				case strings.Contains(rt.path, "{id}"):
					// Another team's registration answers exactly as one
					// that does not exist.
					outCode, out := on(tok, "team-b-1")
					missCode, miss := on(tok, "team-a-none")
					if outCode != missCode || strings.ReplaceAll(out, "team-b-1", "team-a-none") != miss {
						t.Errorf("%s by the %s: team-b-1 %d %s; a missing id %d %s", name, who, outCode, out, missCode, miss)
					}
					if outCode != 404 && outCode != 204 {
						t.Errorf("%s by the %s on team-b-1: %d, want 404 (204 for a DELETE)", name, who, outCode)
					}
				}
			}
			if code, b := on(root, "team-b-2"); code == 401 || code == 403 {
				t.Errorf("%s with the root token: %d %s", name, code, b)
			}
		}
		// The OpenAPI document may be public; nothing else of /v1 is.
		if code, b := callAs(t, d.admin, "", "GET", "/v1/openapi.json", ""); code != 200 && code != 401 {
			t.Errorf("GET /v1/openapi.json without a token: %d %s", code, b)
		}
		if code, _ := callAs(t, d.admin, "", "GET", "/v1/no-such-route", ""); code != 401 {
			t.Errorf("an unknown /v1 path without a token: %d, want 401", code)
		}
		// The scoped calls left team-b-1 as it was.
		if code, b := callAs(t, d.admin, root, "GET", "/v1/registrations/team-b-1", ""); code != 200 || !strings.Contains(b, ok.URL+"/team-b-1") {
			t.Errorf("team-b-1 after the scoped calls: %d %s", code, b)
		}
	})

	t.Run("reads", func(t *testing.T) {
		for _, tok := range tokens {
			var page struct {
				Registrations []struct{ ID string } `json:"registrations"`
			}
			_, b := callAs(t, d.admin, tok, "GET", "/v1/registrations", "")
			_ = json.Unmarshal([]byte(b), &page)
			var ids []string
			for _, r := range page.Registrations {
				ids = append(ids, r.ID)
			}
			if len(ids) == 0 || strings.Contains(strings.Join(ids, ","), "team-b-") {
				t.Errorf("list: %v", ids)
			}
			_, b = callAs(t, d.admin, tok, "GET", "/v1/attempts?seq=1", "")
			if strings.Contains(b, "team-b-") || !strings.Contains(b, "team-a-") {
				t.Errorf("attempts of seq 1: %s", b)
			}
		}
		if _, b := callAs(t, d.admin, viewer, "GET", "/v1/whoami", ""); !strings.Contains(b, `"name":"team-a-view","role":"viewer","idPrefix":"team-a-"`) {
			t.Errorf("whoami: %s", b)
		}
	})

	t.Run("operator", func(t *testing.T) {
		body := fmt.Sprintf(`{"id":"team-a-parks","namespace":"outbox","subject":"journal.orders.>","url":%q,"start":"first"}`, failing.URL)
		if code, b := callAs(t, d.admin, operator, "POST", "/v1/registrations", body); code != 201 {
			t.Fatalf("operator's create: %d %s", code, b)
		}
		waitFor(t, 10*time.Second, "team-a-parks to park", func() bool {
			_, b := callAs(t, d.admin, operator, "GET", "/v1/registrations/team-a-parks", "")
			return strings.Contains(b, `"state":"parked"`)
		})
		if code, b := callAs(t, d.admin, operator, "POST", "/v1/registrations/team-a-parks/unpark", ""); code != 200 {
			t.Fatalf("operator's unpark: %d %s", code, b)
		}
		if code, _ := callAs(t, d.admin, operator, "DELETE", "/v1/registrations/team-a-parks", ""); code != 204 {
			t.Fatalf("operator's delete: %d", code)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		doomed := makeToken(t, d, "doomed", "team-a-", "operator")
		tokens = append(tokens, doomed)
		if code, _ := callAs(t, d.admin, doomed, "GET", "/v1/whoami", ""); code != 200 {
			t.Fatalf("the new token: %d", code)
		}
		if out, code := tokenCLI(t, d, "revoke", "doomed"); code != 0 {
			t.Fatalf("bridge token revoke: %d %s", code, out)
		}
		waitFor(t, 2*time.Second, "the revoked token to be refused", func() bool {
			code, _ := callAs(t, d.admin, doomed, "GET", "/v1/whoami", "")
			return code == 401
		})
	})

	t.Run("expiry", func(t *testing.T) {
		short := makeToken(t, d, "short", "team-a-", "viewer", "--expires", time.Now().Add(2*time.Second).UTC().Format(time.RFC3339))
		tokens = append(tokens, short)
		if code, _ := callAs(t, d.admin, short, "GET", "/v1/registrations", ""); code != 200 {
			t.Fatalf("the token before it expires: %d", code)
		}
		waitFor(t, 5*time.Second, "the token to expire", func() bool {
			code, b := callAs(t, d.admin, short, "GET", "/v1/registrations", "")
			return code == 401 && strings.Contains(b, "expired")
		})
	})

	var logs strings.Builder // of every run of the bridge
	t.Run("restart", func(t *testing.T) {
		logs.WriteString(d.logs.String())
		if code := d.stop(); code != 0 {
			t.Fatalf("bridge exited %d", code)
		}
		d.start()
		if code, b := callAs(t, d.admin, operator, "GET", "/v1/whoami", ""); code != 200 || !strings.Contains(b, "team-a-ops") {
			t.Errorf("the operator token after a restart: %d %s", code, b)
		}
		if code, _ := callAs(t, d.admin, tokens[2], "GET", "/v1/whoami", ""); code != 401 {
			t.Errorf("the revoked token after a restart: %d", code)
		}
		if out, _ := tokenCLI(t, d, "list"); !strings.Contains(out, "team-a-ops") || strings.Contains(out, "doomed") {
			t.Errorf("bridge token list after a restart:\n%s", out)
		}
	})

	t.Run("no token anywhere", func(t *testing.T) {
		time.Sleep(100 * time.Millisecond) // the events of the last calls
		logs.WriteString(d.logs.String())
		var attempts strings.Builder
		for _, id := range []string{"team-a-1", "team-a-2", "team-b-1", "team-b-2"} {
			_, b := callAs(t, d.admin, root, "GET", "/v1/registrations/"+id+"/attempts", "")
			attempts.WriteString(b)
		}
		if !strings.Contains(attempts.String(), `"outcome"`) {
			t.Fatalf("no attempts to look in: %s", attempts.String())
		}
		store, err := os.ReadFile(filepath.Join(d.dataDir, "bridge.db"))
		if err != nil {
			t.Fatal(err)
		}
		evs.mu.Lock()
		all := append([]opEvent(nil), evs.events...)
		evs.mu.Unlock()
		var evText strings.Builder
		for _, e := range all {
			evText.WriteString(e.raw)
		}
		for _, tok := range tokens {
			secret := strings.TrimPrefix(tok, "bst_")
			for where, text := range map[string]string{"the log": logs.String(), "an event": evText.String(),
				"an attempt": attempts.String(), "the store": string(store)} {
				if strings.Contains(text, secret) {
					t.Errorf("%s holds a token", where)
				}
			}
		}
		checkActors(t, all, map[string]string{
			"bridge.events.token.created.team-a-ops":           "root",
			"bridge.events.registration.created.team-a-parks":  "team-a-ops",
			"bridge.events.registration.unparked.team-a-parks": "team-a-ops",
			"bridge.events.registration.deleted.team-a-parks":  "team-a-ops",
			"bridge.events.token.revoked.doomed":               "root",
		})
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `msg="registration `) || strings.Contains(line, `msg="token `) {
				if !strings.Contains(line, "actor=") {
					t.Errorf("an admin write logged without its actor: %s", line)
				}
			}
		}
		if !strings.Contains(logs.String(), "actor=team-a-ops") {
			t.Errorf("the log names no scoped actor")
		}
	})
}

// checkActors fails t unless every event an admin call caused carries
// data.actor, and the events in want name the actor given.
func checkActors(t *testing.T, all []opEvent, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range all {
		var data struct {
			Actor *string `json:"actor"`
		}
		_ = json.Unmarshal(e.ce.Data, &data)
		kind := strings.TrimPrefix(e.ce.Type, "io.jetstream-bridge.")
		switch kind {
		case "registration.created", "registration.deleted", "registration.unparked", "token.created", "token.revoked":
			if data.Actor == nil || *data.Actor == "" {
				t.Errorf("%s carries no actor: %s", e.subject, e.raw)
				continue
			}
		}
		if a, ok := want[e.subject]; ok {
			seen[e.subject] = true
			if data.Actor == nil || *data.Actor != a {
				t.Errorf("%s: actor %v, want %q", e.subject, data.Actor, a)
			}
		}
	}
	for s := range want {
		if !seen[s] {
			t.Errorf("no event on %s", s)
		}
	}
}

// TestTokensAcrossCluster: a token made through one bridge of a cluster
// of three (--store kv) works on the others, and once revoked through
// one it is refused by every bridge within 2 s.
func TestTokensAcrossCluster(t *testing.T) {
	c := newBridgeCluster(t, 3)
	b1, b3 := c.bridges[0].daemon, c.bridges[2].daemon
	token := clusterOperatorToken(t, c)
	if code, b := callAs(t, b3.admin, token, "GET", "/v1/cluster", ""); code != 403 {
		t.Errorf("GET /v1/cluster with a scoped token: %d %s", code, b)
	}
	if code, _ := callAs(t, b1.admin, clusterToken, "DELETE", "/v1/tokens/team-a-ops", ""); code != 204 {
		t.Fatalf("revoke through b1: %d", code)
	}
	c.checkRevoked(token, time.Now())
}

// A revocation made after the kill -9 of the NATS node leading the tokens'
// bucket, once the bucket has a new leader, is refused by every bridge
// within 2 s too: a bridge whose watch's consumer died with the node
// watches again at the election instead of after missed heartbeats.
func TestTokenRevokedAfterANodeLoss(t *testing.T) {
	c := newBridgeCluster(t, 3)
	token := clusterOperatorToken(t, c)
	const bucket = "KV_BRIDGE_tokens"
	node := c.nats.streamLeader(c.js, bucket)
	watch := testutil.JetStream(t, fmt.Sprintf("nats://127.0.0.1:%d", c.nats.nodes[(node+1)%len(c.nats.nodes)].client))
	c.nats.kill9(node)
	c.nats.streamLeaderAsking(watch, bucket, 250*time.Millisecond)
	c.revokeOpsToken(token)
}

// A revocation made after the kill -9 of a NATS node that does not lead
// the tokens' bucket, but holds the consumer of a bridge's watch of the
// tokens, is refused by every bridge within 2 s too: the bucket answers
// the revoke at once, no election of it tells that bridge its watch is
// gone, and the bridge finds its watch silent by the bucket's last
// revision.
func TestTokenRevokedAfterTheLossOfAWatchesNode(t *testing.T) {
	c := newBridgeCluster(t, 3)
	token := clusterOperatorToken(t, c)
	const bucket = "KV_BRIDGE_tokens"
	leader := c.nats.streamLeader(c.js, bucket)
	node, held := c.nats.busiestConsumerNode(c.js, bucket, leader)
	c.nats.kill9(node)
	t.Logf("killed n%d, which held %d of the tokens' watch consumers; n%d leads the bucket", node+1, held, leader+1)
	c.revokeOpsToken(token)
}

// clusterOperatorToken makes an operator token on team-a- through the
// first bridge and waits until every bridge takes it.
func clusterOperatorToken(t *testing.T, c *bridgeCluster) string {
	t.Helper()
	code, body := callAs(t, c.bridges[0].admin, clusterToken, "POST", "/v1/tokens", `{"name":"team-a-ops","idPrefix":"team-a-","role":"operator"}`)
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(body), &tok); code != 201 || err != nil || tok.Token == "" {
		t.Fatalf("create through b1: %d %s", code, body)
	}
	for _, b := range c.bridges {
		waitFor(t, 2*time.Second, "the token to work on "+b.admin, func() bool {
			code, _ := callAs(t, b.admin, tok.Token, "GET", "/v1/whoami", "")
			return code == 200
		})
	}
	return tok.Token
}

// revokeOpsToken revokes team-a-ops through the first bridge, asking
// until the revoke is answered, and checks every bridge refuses token
// within 2 s of that answer.
func (c *bridgeCluster) revokeOpsToken(token string) {
	c.t.Helper()
	var revoked time.Time
	waitFor(c.t, clusterSettle, "the revoke to be answered", func() bool {
		code, _ := callAs(c.t, c.bridges[0].admin, clusterToken, "DELETE", "/v1/tokens/team-a-ops", "")
		revoked = time.Now()
		return code == 204
	})
	c.checkRevoked(token, revoked)
}

// checkRevoked fails the test unless every bridge refuses token within
// 2 s of its revocation's answer.
func (c *bridgeCluster) checkRevoked(token string, revoked time.Time) {
	c.t.Helper()
	for _, b := range c.bridges {
		waitFor(c.t, 2*time.Second-time.Since(revoked), "the revoked token to be refused by "+b.admin, func() bool {
			code, _ := callAs(c.t, b.admin, token, "GET", "/v1/whoami", "")
			return code == 401
		})
	}
	c.t.Logf("refused by all three bridges %v after the revoke answered", time.Since(revoked).Round(time.Millisecond))
}
