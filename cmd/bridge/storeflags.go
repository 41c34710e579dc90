package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/lease"
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

// storeFlags choose where registrations live and, for the kv store, how
// this bridge takes part in the cluster.
type storeFlags struct {
	store    string
	kv       kvFlags
	instance string
	leaseTTL time.Duration
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.store, "store", "bolt", "bolt (bridge.db in --data-dir) or kv (replicated JetStream key-value buckets, for several bridges)")
	s.kv.register(fs)
	fs.StringVar(&s.instance, "instance", "", "this bridge's name among the bridges of --store kv (default host name and a random suffix)")
	fs.DurationVar(&s.leaseTTL, "lease-ttl", lease.DefaultTTL, "how long this bridge's share of registrations outlives its last contact with NATS (--store kv)")
}

func (s *storeFlags) validate() error {
	switch s.store {
	case "bolt":
		return nil
	case "kv":
	default:
		return fmt.Errorf("--store must be bolt or kv, got %q", s.store)
	}
	if err := s.kv.validate(); err != nil {
		return err
	}
	if s.leaseTTL < lease.MinTTL {
		return fmt.Errorf("--lease-ttl must be at least %v, got %v", lease.MinTTL, s.leaseTTL)
	}
	if s.instance == "" {
		s.instance = defaultInstance()
	}
	if !instanceName.MatchString(s.instance) {
		return fmt.Errorf("--instance %q: only letters, digits, '-', '_' and '=' are allowed", s.instance)
	}
	return nil
}

var instanceName = regexp.MustCompile(`^[-_=a-zA-Z0-9]+$`)

// defaultInstance is the host name with a random suffix, so two bridges
// on one host never collide by default.
func defaultInstance() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hostLabel() + "-" + hex.EncodeToString(b)
}

// hostLabel is the host name with every character a name of the cluster
// (instance or server) cannot hold replaced by '-'; "bridge" without one.
func hostLabel() string {
	host, err := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r < 0x80 && instanceName.MatchString(string(r)) {
			return r
		}
		return '-'
	}, host)
	if err != nil || host == "" {
		return "bridge"
	}
	return host
}
