package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetstream-bridge/bridge/admin"
	"github.com/jetstream-bridge/bridge/attempt"
	"github.com/jetstream-bridge/bridge/bridge"
	"github.com/jetstream-bridge/bridge/internal/bytesize"
	"github.com/jetstream-bridge/bridge/webhook"
)

// openAttempts starts the attempt log, or returns nil with
// AttemptLog false. The stream is created with the kv store's replicas,
// so the log survives what the registrations survive, and its limits are
// set to the flags' values on every start.
func openAttempts(ctx context.Context, c *Config, nc *nats.Conn, log *slog.Logger) (*attempt.Log, error) {
	if !c.AttemptLog {
		log.Info("attempt log off (AttemptLog false, --attempt-log=false): POSTs are not recorded")
		return nil, nil
	}
	replicas := 1
	if c.Store == "kv" {
		replicas = c.KVReplicas
	}
	var l *attempt.Log
	err := untilSettled(ctx, log, "the attempts stream "+c.AttemptsStream, func(ctx context.Context) (err error) {
		l, err = attempt.Open(ctx, nc, attempt.Config{
			Stream: c.AttemptsStream, MaxAge: c.AttemptsMaxAge, MaxBytes: int64(c.AttemptsMaxBytes), Replicas: replicas, Logger: log,
		})
		return err
	})
	if err != nil {
		return nil, noRoomHint(err, c.AttemptsMaxBytes)
	}
	log.Info("attempt log: every POST is recorded; the log is bounded, the oldest records go first",
		"stream", c.AttemptsStream, "subjects", attempt.Subjects(c.AttemptsStream), "maxAge", c.AttemptsMaxAge, "maxBytes", bytesize.Size(c.AttemptsMaxBytes).String(), "replicas", replicas)
	return l, nil
}

// closeAttempts hands what is queued to NATS before the connection closes.
func closeAttempts(l *attempt.Log) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.Close(ctx)
}

// What the attempt log adds to the sender, the workers, the admin API
// and the registry; nothing when it is off.

func responseBody(l *attempt.Log) webhook.Option {
	if l == nil {
		return webhook.WithResponseBody(0)
	}
	return webhook.WithResponseBody(attempt.MaxResponse)
}

func recording(l *attempt.Log) []bridge.Option {
	if l == nil {
		return nil
	}
	return []bridge.Option{bridge.WithRecorder(l)}
}

func attemptReader(l *attempt.Log) admin.Attempts {
	if l == nil {
		return nil // a nil *attempt.Log in the interface would not be nil
	}
	return l
}

func attemptCollectors(l *attempt.Log) []prometheus.Collector {
	if l == nil {
		return nil
	}
	return l.Collectors()
}

// codeInsufficientStorage is JetStream's "insufficient storage resources
// available": a stream's max_bytes beyond what the server can reserve.
const codeInsufficientStorage = 10047

// noRoomHint adds to JetStream's refusal to reserve the log's bytes what
// the operator can do about it.
func noRoomHint(err error, maxBytes uint64) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == codeInsufficientStorage {
		return configErr("AttemptsMaxBytes", "%[2]v: the server cannot reserve %[1]s %[3]s for the attempt log; lower it, give JetStream more storage, or run with %[4]s=false",
			err, bytesize.Size(maxBytes).String(), field("AttemptLog"))
	}
	return err
}
