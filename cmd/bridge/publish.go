package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/internal/natsopt"
	"github.com/jetstream-bridge/bridge/internal/runflags"
)

const (
	defaultNATSURL = "nats://127.0.0.1:4222"
	// publishTimeout bounds connecting and waiting for the stream's ack.
	publishTimeout = 10 * time.Second
	// maxPublishBytes bounds what publish reads from stdin; a NATS server
	// refuses far less (1 MiB by default) and says so.
	maxPublishBytes = 64 << 20
)

// natsOptions turns the NATS client flags into nats.go options.
func natsOptions(n *runflags.NATS) ([]nats.Option, error) {
	if (n.TLSCert == "") != (n.TLSKey == "") {
		return nil, usagef("--nats-tls-cert and --nats-tls-key go together")
	}
	opts, err := n.Options()
	if err != nil {
		return nil, fmt.Errorf("--nats-nkey: %w", err)
	}
	return opts, nil
}

// headerFlags collects repeated --header K:V flags.
type headerFlags nats.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") {
		return errors.New("want NAME:VALUE")
	}
	nats.Header(h).Add(k, strings.TrimSpace(val))
	return nil
}

// cmdPublish publishes one message through JetStream, so it returns only
// once the stream has stored it, and says where.
func cmdPublish(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	natsURL := fs.String("nats-url", envOr("NATS_URL", defaultNATSURL), "NATS server URL (default: $NATS_URL, else "+defaultNATSURL+")")
	headers := headerFlags(nats.Header{})
	fs.Var(headers, "header", "message header NAME:VALUE (repeatable), e.g. Nats-Msg-Id:order-1")
	var sec runflags.NATS
	sec.Register(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	switch {
	case len(pos) == 0:
		return usagef("missing SUBJECT")
	case len(pos) > 2:
		return usagef("unexpected argument %q (quote DATA, or use - to read it from stdin)", pos[2])
	}
	subject := pos[0]
	data, err := publishData(pos[1:], s.in)
	if err != nil {
		return err
	}
	opts, err := natsOptions(&sec)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header(headers)}
	ack, err := publish(ctx, *natsURL, opts, msg)
	if err != nil {
		return err
	}
	dup := ""
	if ack.Duplicate {
		dup = " (duplicate: the stream already had this Nats-Msg-Id)"
	}
	fmt.Fprintf(s.out, "published %s as %s sequence %d%s\n", subject, ack.Stream, ack.Sequence, dup)
	return nil
}

// publishData is DATA, or stdin when DATA is "-" or absent.
func publishData(args []string, stdin io.Reader) ([]byte, error) {
	if len(args) == 1 && args[0] != "-" {
		return []byte(args[0]), nil
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxPublishBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the message from stdin: %w", err)
	}
	if len(data) > maxPublishBytes {
		return nil, fmt.Errorf("the message on stdin exceeds %d bytes", maxPublishBytes)
	}
	return data, nil
}

func publish(ctx context.Context, servers string, opts []nats.Option, msg *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	opts = append(opts, nats.Name("bridge publish"), nats.Timeout(publishTimeout), nats.NoReconnect())
	nc, err := nats.Connect(servers, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", redactURLs(servers), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	ack, err := js.PublishMsg(ctx, msg)
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("no stream stores subject %s on %s: do the bridge's --stream-subjects cover it?", msg.Subject, redactURLs(servers))
	case err != nil:
		return nil, fmt.Errorf("publishing to %s: %w", msg.Subject, err)
	}
	return ack, nil
}

func redactURLs(servers string) string { return natsopt.RedactURLs(servers) }

// envOr is the environment variable name, else def.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
