package main

import (
	"errors"
	"flag"

	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/daemon"
)

// kvFlags name the key-value buckets of the kv store; `bridge run` and
// `bridge migrate` share them so both address the same buckets.
type kvFlags struct {
	bucket   string
	replicas int
}

func (k *kvFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.bucket, "kv-bucket", kvstore.DefaultPrefix, "name prefix of the key-value buckets of --store kv")
	fs.IntVar(&k.replicas, "kv-replicas", kvstore.DefaultReplicas, "replicas of the key-value buckets of --store kv")
}

// validate checks the flags as the daemon checks them, so migrate
// refuses exactly the buckets `bridge run --store kv` would.
func (k *kvFlags) validate() error {
	c := daemon.DefaultConfig()
	c.Store, c.KVBucket, c.KVReplicas = "kv", k.bucket, k.replicas
	if err := c.Validate(); err != nil {
		return errors.New(flagMessage(err))
	}
	return nil
}
