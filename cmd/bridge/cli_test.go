package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/internal/openapitest"
	"github.com/jetstream-bridge/bridge/internal/runflags"
	"github.com/jetstream-bridge/bridge/netguard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "cli-test-token"

// apiServer is a real admin API, on a real store, on loopback.
type apiServer struct {
	url   string
	store *cursor.DB
}

func startAPI(t *testing.T) *apiServer {
	t.Helper()
	store, err := cursor.Open(filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	api := admin.New(admin.Options{
		Store:   store,
		Journal: fixedJournal{first: 1, last: 41},
		Guard:   netguard.NewPolicy(netguard.WithAllowLoopbackHTTP(true)),
		Token:   testToken,
	})
	// The CLI's every call and the API's every answer are checked
	// against the OpenAPI document: the CLI is a client of it like any.
	v, err := openapitest.New(admin.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v.Handler(api, func(_ *http.Request, err error) { t.Error(err) }))
	t.Cleanup(func() {
		srv.Close()
		if err := store.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return &apiServer{url: srv.URL, store: store}
}

// fixedJournal is a stream holding sequences first..last; every time
// falls on the first.
type fixedJournal struct{ first, last uint64 }

func (j fixedJournal) Bounds(context.Context) (uint64, uint64, error) { return j.first, j.last, nil }

func (j fixedJournal) SeqAtTime(context.Context, time.Time) (uint64, error) { return j.first, nil }

// cliResult is what one CLI run printed and returned.
type cliResult struct {
	code        int
	out, errOut string
}

// cli runs the bridge command in-process, as a user would from a shell.
func cli(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := dispatch(t.Context(), args, streams{in: strings.NewReader(stdin), out: &out, errOut: &errOut})
	return cliResult{code: code, out: out.String(), errOut: errOut.String()}
}

// against runs an admin subcommand against api with the test token.
func (api *apiServer) cli(t *testing.T, name string, args ...string) cliResult {
	t.Helper()
	return cli(t, "", append([]string{name, "--admin-url", api.url, "--admin-token", testToken}, args...)...)
}

func (r cliResult) want(t *testing.T, code int, fragments ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.out, r.errOut)
	}
	all := r.out + r.errOut
	for _, f := range fragments {
		if !strings.Contains(all, f) {
			t.Errorf("output does not contain %q\nstdout: %s\nstderr: %s", f, r.out, r.errOut)
		}
	}
}

// cleanEnv hides the caller's BRIDGE_* and NATS_URL variables, so a test
// sees only the environment it sets.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, runflags.EnvPrefix) || name == "NATS_URL" {
			t.Setenv(name, "")
		}
	}
}
