package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jetstream-bridge/bridge/daemon"
	"github.com/jetstream-bridge/bridge/internal/runflags"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, s := runflags.New(stderr)
	if err := runflags.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bridge run:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bridge run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := s.Config(stderr, version)
	var d *daemon.Daemon
	if err == nil {
		d, err = daemon.New(cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bridge run:", runflags.Message(err))
		return 2
	}
	stop := announceStop(ctx, cfg.Logger)
	defer stop()
	if err := d.Run(ctx); err != nil {
		cfg.Logger.Error("bridge stopped", "error", err)
		fmt.Fprintln(stderr, "bridge run:", runflags.Message(err))
		return 1
	}
	return 0
}

// announceStop logs the start of a clean stop. main cancels ctx on the
// first SIGINT or SIGTERM and restores the default handling, so a second
// signal ends the process at once.
func announceStop(ctx context.Context, log *slog.Logger) func() bool {
	return context.AfterFunc(ctx, func() {
		log.Info("stopping: finishing in-flight deliveries and flushing cursors (signal again to exit at once)")
	})
}
