// Package testutil holds what several packages' tests need alike. Only
// tests, and bridgetest for the tests of others, import it.
package testutil

import (
	"bytes"
	"sync"
)

// SyncBuffer collects output written by other goroutines (a logger, a
// subcommand, a child process) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
