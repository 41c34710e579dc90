package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// NotFoundError reports that the journal stream does not exist and the
// bridge was not allowed to create it. It matches
// jetstream.ErrStreamNotFound under errors.Is.
type NotFoundError struct {
	Stream string
	// Server is the URL of the server asked, without credentials.
	Server string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("stream %s not found on %s; create it or run with --create-stream", e.Stream, e.Server)
}

// Is makes errors.Is(err, jetstream.ErrStreamNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == jetstream.ErrStreamNotFound }

// StreamOption adjusts the stream EnsureStream creates; an existing
// stream is never changed.
type StreamOption func(*jetstream.StreamConfig)

// StreamReplicas creates the stream with n replicas: bridges that share a
// cluster so that any server may die need the journal to survive that
// loss as their store's buckets do.
func StreamReplicas(n int) StreamOption {
	return func(c *jetstream.StreamConfig) { c.Replicas = n }
}

// EnsureStream returns the journal stream, creating it when create is true
// and it is missing.
//
// A created stream uses file storage and allow_direct, so the Reader's
// batched reads create no consumer. An existing stream is used as it is —
// the operator owns its subjects, limits and replicas — and one without
// allow_direct is read through short-lived pull consumers (the Reader logs
// that once).
// Without create, a missing stream is a *NotFoundError naming the stream
// and the server, so the operator learns what to fix instead of waiting on
// a bridge that delivers nothing.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name string, subjects []string, create bool, opts ...StreamOption) (jetstream.Stream, error) {
	if err := validateStreamName(name); err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, name)
	if err == nil {
		return s, nil
	}
	server := js.Conn().ConnectedUrlRedacted()
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("journal: looking up stream %s on %s: %w", name, server, err)
	}
	if !create {
		return nil, &NotFoundError{Stream: name, Server: server}
	}
	if len(subjects) == 0 {
		return nil, fmt.Errorf("journal: cannot create stream %s without subjects", name)
	}
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "journal read by the webhook bridge",
		Subjects:    subjects,
		Storage:     jetstream.FileStorage,
		AllowDirect: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another process created it between the lookup and the create.
		return js.Stream(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: creating stream %s on %s: %w", name, server, err)
	}
	return s, nil
}
