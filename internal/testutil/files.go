package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes text into dir/name, readable by its owner only as
// keys must be, and returns the path.
func WriteFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
