package main

import (
	"context"
	"fmt"
	"io"
)

// cmdRun starts the daemon. The wiring lands with the delivery engine.
func cmdRun(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "bridge run: not wired yet")
	return 1
}
