// Command bridge turns a NATS JetStream stream into reliable webhooks.
//
// "bridge run" is the daemon; every other subcommand is a small client of
// its admin API (register, list, show, delete, unpark, rewind, apply, purge), of
// NATS (publish), or a receiver for trying it out (listen). The client
// subcommands hold no state and never touch the store directly: the
// daemon owns it. migrate alone opens a store: it copies a bolt store no
// bridge holds (its lock says so) into the kv store.
//
// Exit codes: 0 success, 1 an error reported by the API or a runtime
// failure, 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jetstream-bridge/bridge/internal/runflags"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// streams is where a subcommand reads and writes; tests give buffers.
type streams struct {
	in          io.Reader
	out, errOut io.Writer
}

// command is one subcommand. run reports failure as an error; dispatch
// turns it into the message and the exit code, so every subcommand fails
// the same way.
type command struct {
	name     string
	synopsis string // what follows "bridge <name>" in the usage line
	summary  string
	run      func(ctx context.Context, s *session, args []string) error
}

// commands is the table of subcommands, in the order help lists them.
func commands() []command {
	return []command{
		{"run", "[flags]", "run the bridge daemon", runDaemon},
		{"register", registerSynopsis, "register a webhook", cmdRegister},
		{"list", "[--parked] [--namespace N] [--state S] [--json]", "list registrations", cmdList},
		{"show", "[--json] ID", "show one registration", cmdShow},
		{"delete", "[--json] ID", "delete a registration", cmdDelete},
		{"unpark", "[--json] ID", "resume a parked registration", cmdUnpark},
		{"rewind", "(--seq N | --time RFC3339) [--json] ID", "move a registration's cursor", cmdRewind},
		{"attempts", "[--seq N] [--limit N] [--json] [ID]", "show the POSTs made, newest first", cmdAttempts},
		{"resend", "--seq N [--json] ID", "POST one journal message again", cmdResend},
		{"apply", applySynopsis, "make the registrations match a file", cmdApply},
		{"token", tokenSynopsis, "make, list and revoke scoped access tokens of the admin API", cmdToken},
		{"purge", "--completed-older-than D [--batch-size N] [--max-batches N] [--idempotency-key-max-age D|none] [--json]", "delete old completed registrations", cmdPurge},
		{"migrate", migrateSynopsis, "copy a bolt store into the kv store of --store kv", cmdMigrate},
		{"publish", "[--nats-url URL] [--header K:V]... SUBJECT [DATA | -]", "publish a message to the journal", cmdPublish},
		{"listen", "--addr HOST:PORT [--secret whsec_...] [--status N]", "receive and print webhooks", cmdListen},
		{"version", "", "print the version", cmdVersion},
		{"help", "", "print this help", cmdHelp},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the default handling comes back, so a second
	// one ends the process at once instead of waiting for a clean stop.
	context.AfterFunc(ctx, stop)
	code := dispatch(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, errOut: os.Stderr})
	stop()
	os.Exit(code)
}

// dispatch runs the subcommand args name and returns the exit code.
func dispatch(ctx context.Context, args []string, std streams) int {
	if len(args) == 0 {
		printHelp(std.errOut)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			s := &session{streams: std, cmd: c}
			return s.exit(c.run(ctx, s, args[1:]))
		}
	}
	fmt.Fprintf(std.errOut, "bridge: unknown subcommand %q\n", name)
	fmt.Fprintln(std.errOut, "usage: bridge <subcommand> [flags] [args]; run 'bridge help' for the list")
	return exitUsage
}

// runDaemon hands over to the daemon, which reports its own exit code.
func runDaemon(ctx context.Context, s *session, args []string) error {
	if code := cmdRun(ctx, args, s.out, s.errOut); code != exitOK {
		return exitCode(code)
	}
	return nil
}

func cmdHelp(_ context.Context, s *session, args []string) error {
	if len(args) > 0 {
		return usagef("help takes no arguments")
	}
	printHelp(s.out)
	return nil
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "bridge turns a NATS JetStream stream into reliable webhooks.")
	fmt.Fprintln(w, "\nusage: bridge <subcommand> [flags] [args]")
	fmt.Fprintln(w, "\nsubcommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nFlags precede positional arguments; 'bridge <subcommand> -h' lists them.")
	fmt.Fprintln(w, "Every flag can be set as BRIDGE_<FLAG_IN_UPPER_SNAKE>; the flag wins.")
}

// session is one subcommand's run: its streams and its usage line.
type session struct {
	streams
	cmd command
}

// usageError is bad usage: exit 2, with the usage line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitCode is a failure already reported, carrying the code to exit with.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// errHelpShown ends a subcommand whose help was asked for and printed.
var errHelpShown = errors.New("help shown")

// exit reports err and returns the exit code it means.
func (s *session) exit(err error) int {
	var usage *usageError
	var code exitCode
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(s.errOut, "bridge %s: %s\n", s.cmd.name, usage.msg)
		fmt.Fprintf(s.errOut, "usage: bridge %s %s\n", s.cmd.name, s.cmd.synopsis)
		fmt.Fprintf(s.errOut, "run 'bridge %s -h' for its flags\n", s.cmd.name)
		return exitUsage
	}
	fmt.Fprintf(s.errOut, "bridge %s: %v\n", s.cmd.name, err)
	return exitFailure
}

// flags returns the subcommand's FlagSet. It prints nothing itself: errors
// go through exit, help through parse.
func (s *session) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("bridge "+s.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with runflags.Parse (flags, then their BRIDGE_*
// variables); -h prints the flags and stops the
// subcommand successfully.
func (s *session) parse(fs *flag.FlagSet, args []string) error {
	err := runflags.Parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(s.out, "usage: bridge %s %s\n\n%s.\n\nflags:\n", s.cmd.name, s.cmd.synopsis, s.cmd.summary)
		fs.SetOutput(s.out)
		fs.PrintDefaults()
		return errHelpShown
	case err != nil:
		return &usageError{msg: err.Error()}
	}
	return nil
}

// positional returns exactly the positional arguments named.
func positional(fs *flag.FlagSet, names ...string) ([]string, error) {
	args := fs.Args()
	switch {
	case len(args) < len(names):
		return nil, usagef("missing %s", names[len(args)])
	case len(args) > len(names):
		return nil, usagef("unexpected argument %q (flags must precede arguments)", args[len(names)])
	}
	return args, nil
}
