package main

import (
	"flag"
	"fmt"
	"regexp"

	"github.com/jetstream-bridge/bridge/cursor/kvstore"
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

var bucketName = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)

func (k *kvFlags) validate() error {
	if !bucketName.MatchString(k.bucket) {
		return fmt.Errorf("--kv-bucket %q: only letters, digits, '-' and '_' are allowed", k.bucket)
	}
	if k.replicas < 1 || k.replicas > 5 {
		return fmt.Errorf("--kv-replicas must be between 1 and 5, got %d", k.replicas)
	}
	return nil
}
