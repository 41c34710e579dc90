package runflags

import (
	"errors"
	"flag"

	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/daemon"
	"github.com/jetstream-bridge/bridge/internal/natsopt"
)

// NATS are the usual NATS client security flags, shared by `bridge run`,
// `bridge publish` and `bridge migrate`.
type NATS struct {
	natsopt.Security
}

// Register adds the flags to fs.
func (n *NATS) Register(fs *flag.FlagSet) {
	fs.StringVar(&n.Creds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&n.Nkey, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&n.User, "nats-user", "", "NATS user")
	fs.StringVar(&n.Password, "nats-password", "", "NATS password")
	fs.StringVar(&n.TLSCA, "nats-tls-ca", "", "CA certificate file for the NATS server")
	fs.StringVar(&n.TLSCert, "nats-tls-cert", "", "client certificate file for NATS")
	fs.StringVar(&n.TLSKey, "nats-tls-key", "", "client key file for NATS")
}

// KV name the key-value buckets of the kv store; `bridge run` and
// `bridge migrate` share them so both address the same buckets.
type KV struct {
	Bucket   string
	Replicas int
}

// Register adds the flags to fs.
func (k *KV) Register(fs *flag.FlagSet) {
	fs.StringVar(&k.Bucket, "kv-bucket", kvstore.DefaultPrefix, "name prefix of the key-value buckets of --store kv")
	fs.IntVar(&k.Replicas, "kv-replicas", kvstore.DefaultReplicas, "replicas of the key-value buckets of --store kv")
}

// Validate checks the flags as the daemon checks them, so migrate
// refuses exactly the buckets `bridge run --store kv` would.
func (k *KV) Validate() error {
	c := daemon.DefaultConfig()
	c.Store, c.KVBucket, c.KVReplicas = "kv", k.Bucket, k.Replicas
	if err := c.Validate(); err != nil {
		return errors.New(Message(err))
	}
	return nil
}
