package openapitest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The validator and kin-openapi are for tests only: the bridge's binary
// links neither, so checking answers costs production nothing.
func TestNotLinkedIntoTheBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/jetstream-bridge/bridge/cmd/bridge").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/bridge: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps ./cmd/bridge listed %d packages; expected the binary's whole tree", len(deps))
	}
	for _, p := range deps {
		if strings.Contains(p, "kin-openapi") || strings.HasSuffix(p, "/internal/openapitest") {
			t.Errorf("the bridge binary links %s", p)
		}
	}
}
