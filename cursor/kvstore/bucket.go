package kvstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// openBucket binds the bucket, creating it when it is missing, and waits
// (until ctx ends, logging why) while bridges starting together race to
// create it. An existing bucket's configuration is left as it is.
//
// Its stream then answers reads from the leader only: with direct gets a
// lagging replica may answer a Get made just after another bridge's write
// was acknowledged with the value before it, and the admin API promises
// that a write is visible through every bridge once it has answered.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, log *slog.Logger) (jetstream.KeyValue, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		kv, err := bindOrCreate(ctx, js, cfg)
		if err == nil {
			return kv, nil
		}
		if !retriable(err) {
			return nil, err
		}
		log.Info("kvstore: waiting for bucket", "bucket", cfg.Bucket, "error", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// attemptWait bounds one attempt: a create racing another's in a cluster
// can go unanswered, and waiting for it the whole setup would be waiting
// for nothing.
const attemptWait = 2 * time.Second

func bindOrCreate(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptWait)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err = js.CreateStream(ctx, bucketStream(cfg)); err != nil {
			return nil, fmt.Errorf("creating: %w", err)
		}
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("binding: %w", err)
	}
	if kv, err = leaderReads(ctx, js, kv); err != nil {
		return nil, fmt.Errorf("turning direct gets off: %w", err)
	}
	return kv, nil
}

// bucketStream is the stream of a key-value bucket as nats.go's
// CreateKeyValue makes it (ADR-8), but answering reads from its leader
// only (see openBucket). Created so, racing creates by bridges starting
// together carry one configuration, and none has to update it.
func bucketStream(cfg jetstream.KeyValueConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              "KV_" + cfg.Bucket,
		Subjects:          []string{"$KV." + cfg.Bucket + ".>"},
		MaxMsgsPerSubject: int64(max(cfg.History, 1)),
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          max(cfg.Replicas, 1),
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        2 * time.Minute,
		Discard:           jetstream.DiscardNew,
		AllowDirect:       false,
	}
}

// retriable reports errors of a cluster still settling: a create lost to
// another bridge's, a stream just created and not yet found, JetStream
// without a leader yet, a request timing out.
// A refusal such as more replicas than servers is not.
func retriable(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.Code == 503 {
		return true
	}
	return errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) ||
		errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// leaderReads turns off direct gets on the bucket's stream and binds the
// bucket again, so that its Gets go to the stream leader.
func leaderReads(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (jetstream.KeyValue, error) {
	st, err := js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return nil, err
	}
	cfg := st.CachedInfo().Config
	if !cfg.AllowDirect {
		return kv, nil
	}
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return nil, err
	}
	return js.KeyValue(ctx, kv.Bucket())
}
