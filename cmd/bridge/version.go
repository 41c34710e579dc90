package main

import (
	"context"
	"fmt"
	"runtime"
)

// version is the release, set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/bridge
var version = "dev"

func cmdVersion(_ context.Context, s *session, args []string) error {
	fs := s.flags()
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "bridge %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
