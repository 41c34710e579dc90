package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/cursor/kvstore"
	"github.com/jetstream-bridge/bridge/internal/runflags"
)

const migrateSynopsis = "--from-bolt PATH [--nats-url URL] [--kv-bucket B] [--kv-replicas N] [--json]"

// cmdMigrate copies a bolt store into the kv store, so a single bridge
// moves to a cluster with its registrations, cursors, states and
// idempotency keys. It opens the file as a bridge does, so a store a
// running bridge holds is refused by its lock rather than copied while
// its cursors still move; and it writes every entry with a create, so a
// second run, or one against buckets bridges already serve, never
// overwrites anything.
func cmdMigrate(ctx context.Context, s *session, args []string) error {
	fs := s.flags()
	from := fs.String("from-bolt", "", "the bbolt file to copy (bridge.db in the --data-dir of the bridge it served)")
	natsURL := fs.String("nats-url", "", "NATS server holding the kv store (also NATS_URL)")
	var sec runflags.NATS
	sec.Register(fs)
	var kv runflags.KV
	kv.Register(fs)
	asJSON := fs.Bool("json", false, "print what happened to each registration and idempotency key")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if _, err := positional(fs); err != nil {
		return err
	}
	if *natsURL == "" {
		*natsURL = os.Getenv("NATS_URL")
	}
	switch {
	case *from == "":
		return usagef("missing --from-bolt PATH")
	case *natsURL == "":
		return usagef("missing --nats-url (or NATS_URL): migrate copies into the kv store of a NATS server that is running")
	}
	if err := kv.Validate(); err != nil {
		return usagef("%v", err)
	}
	opts, err := natsOptions(&sec)
	if err != nil {
		return err
	}
	db, err := openBoltStore(*from)
	if err != nil {
		return err
	}
	defer db.Close()
	log := slog.New(slog.NewTextHandler(s.errOut, nil))
	rep, err := migrateStore(ctx, db, *natsURL, opts, kv, log)
	if err != nil && !rep.started() {
		return err
	}
	if perr := rep.print(s.out, s.errOut, *asJSON); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("%w (what was copied stays; run migrate again to copy the rest)", err)
	}
	return db.Close()
}

// openBoltStore opens the bolt store at path, refusing a path that holds
// none: cursor.Open would create an empty store there and report nothing
// copied, hiding a mistyped path.
func openBoltStore(path string) (*cursor.DB, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no bolt store at %s", path)
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory; give the store's file, e.g. %s", path, filepath.Join(path, "bridge.db"))
	}
	return cursor.Open(path) // its errors name the file: locked, damaged, newer
}

// migrateStore copies every registration of db, with its keys, then the
// keys of registrations deleted since, into the kv store at url. The
// report holds what was done up to an error.
func migrateStore(ctx context.Context, db *cursor.DB, url string, opts []nats.Option, kv runflags.KV, log *slog.Logger) (*migrateReport, error) {
	rep := &migrateReport{Registrations: []migratedRegistration{}, Keys: []migratedKey{}, Tokens: []migratedToken{}}
	keys, err := keysByID(ctx, db)
	if err != nil {
		return rep, err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("bridge migrate"), nats.Timeout(publishTimeout))...)
	if err != nil {
		return rep, fmt.Errorf("connecting to NATS at %s: %w", redactURLs(url), err)
	}
	defer nc.Close()
	store, err := openKVStore(ctx, nc, kv, log)
	if err != nil {
		return rep, err
	}
	defer store.Close()
	if err := copyRegistrations(ctx, db, store, keys, rep); err != nil {
		return rep, err
	}
	if err := copyDeletedKeys(ctx, store, keys, rep); err != nil {
		return rep, err
	}
	if err := copyTokens(ctx, db, store, rep); err != nil {
		return rep, err
	}
	return rep, store.Close()
}

// copyTokens copies the scoped access tokens (their hashes: the bolt
// store has nothing else of them), so every token works on the cluster
// as it did on the bridge alone. A name the kv store holds already is
// skipped when it is the same token, and left as it is when not.
func copyTokens(ctx context.Context, from, to cursor.Tokens, rep *migrateReport) error {
	all, err := from.ListTokens(ctx)
	if err != nil {
		return err
	}
	for _, t := range all {
		out := kvstore.Copied
		switch err := to.CreateToken(ctx, t); {
		case errors.Is(err, cursor.ErrTokenExists):
			if out, err = compareToken(ctx, to, t); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("copying token %q: %w", t.Name, err)
		}
		rep.Tokens = append(rep.Tokens, migratedToken{Name: t.Name, Result: out})
	}
	return nil
}

func compareToken(ctx context.Context, store cursor.Tokens, t cursor.Token) (kvstore.Outcome, error) {
	all, err := store.ListTokens(ctx)
	if err != nil {
		return "", err
	}
	for _, have := range all {
		if have.Name == t.Name && bytes.Equal(have.Hash, t.Hash) && have.IDPrefix == t.IDPrefix && have.Role == t.Role &&
			have.ExpiresAt.Equal(t.ExpiresAt) && have.CreatedAt.Equal(t.CreatedAt) {
			return kvstore.Skipped, nil
		}
	}
	return kvstore.Different, nil
}

// keysByID is every idempotency key of db by the registration it names.
func keysByID(ctx context.Context, db *cursor.DB) (map[string][]cursor.StoredKey, error) {
	keys, err := db.IdempotencyKeys(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string][]cursor.StoredKey{}
	for _, k := range keys {
		byID[k.ID] = append(byID[k.ID], k)
	}
	return byID, nil
}

// openKVStore opens the kv store as `bridge run --store kv` would,
// creating its buckets when no bridge has yet.
func openKVStore(ctx context.Context, nc *nats.Conn, kv runflags.KV, log *slog.Logger) (*kvstore.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // as a bridge waits for a fresh cluster
	defer cancel()
	return kvstore.Open(ctx, js, kvstore.WithPrefix(kv.Bucket), kvstore.WithReplicas(kv.Replicas), kvstore.WithLogger(log))
}

// copyRegistrations imports db's registrations page by page, each with
// its keys, which it takes out of keys.
func copyRegistrations(ctx context.Context, db *cursor.DB, store *kvstore.Store, keys map[string][]cursor.StoredKey, rep *migrateReport) error {
	for after := ""; ; {
		rows, next, err := db.List(ctx, cursor.ListOptions{After: after, Limit: cursor.MaxListLimit})
		if err != nil {
			return err
		}
		for _, r := range rows {
			res, err := store.Import(ctx, r, keys[r.ID])
			if err != nil {
				return err
			}
			delete(keys, r.ID)
			rep.addRegistration(r.ID, res)
		}
		if next == "" {
			return nil
		}
		after = next
	}
}

// copyDeletedKeys imports the keys left once every registration took its
// own: those of registrations deleted before the migration.
func copyDeletedKeys(ctx context.Context, store *kvstore.Store, keys map[string][]cursor.StoredKey, rep *migrateReport) error {
	for _, id := range slices.Sorted(maps.Keys(keys)) {
		for _, k := range keys[id] {
			out, err := store.ImportKey(ctx, k)
			if err != nil {
				return err
			}
			rep.Keys = append(rep.Keys, migratedKey{Key: k.Key, ID: id, Result: out})
		}
	}
	return nil
}

// migrateReport is what migrate did. The counts are of registrations,
// each counted once for itself and the keys that created it; Keys holds
// the keys of registrations deleted before the migration.
type migrateReport struct {
	Copied        int                    `json:"copied"`
	Skipped       int                    `json:"skipped"`
	Different     int                    `json:"different"`
	Registrations []migratedRegistration `json:"registrations"`
	Keys          []migratedKey          `json:"deletedRegistrationKeys"`
	// Tokens are the scoped access tokens, copied after the rest.
	Tokens []migratedToken `json:"tokens"`
}

type migratedToken struct {
	Name   string          `json:"name"`
	Result kvstore.Outcome `json:"result"`
}

type migratedRegistration struct {
	ID     string          `json:"id"`
	Result kvstore.Outcome `json:"result"`
	Row    kvstore.Outcome `json:"row"`
	Keys   []migratedKey   `json:"idempotencyKeys,omitempty"`
}

// migratedKey is one idempotency key; ID names its registration where
// the key is not listed beside it.
type migratedKey struct {
	Key    string          `json:"key"`
	ID     string          `json:"id,omitempty"`
	Result kvstore.Outcome `json:"result"`
}

// started reports whether anything was imported, or tried.
func (m *migrateReport) started() bool { return len(m.Registrations)+len(m.Keys)+len(m.Tokens) > 0 }

func (m *migrateReport) addRegistration(id string, res kvstore.ImportResult) {
	out := res.Outcome()
	switch out {
	case kvstore.Copied:
		m.Copied++
	case kvstore.Skipped:
		m.Skipped++
	case kvstore.Different:
		m.Different++
	}
	mr := migratedRegistration{ID: id, Result: out, Row: res.Registration}
	for _, k := range res.Keys {
		mr.Keys = append(mr.Keys, migratedKey{Key: k.Key, Result: k.Outcome})
	}
	m.Registrations = append(m.Registrations, mr)
}

// print writes the report: the counts, and on errOut what an operator
// must look at (the registrations left different); with asJSON, all of
// it as one JSON object.
func (m *migrateReport) print(out, errOut io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	if _, err := fmt.Fprintf(out, "copied %d, skipped %d, different %d\n", m.Copied, m.Skipped, m.Different); err != nil {
		return err
	}
	var diff []string
	for _, r := range m.Registrations {
		if r.Result == kvstore.Different {
			diff = append(diff, r.ID)
		}
	}
	for _, k := range m.Keys {
		if k.Result == kvstore.Different {
			diff = append(diff, fmt.Sprintf("idempotency key %q of deleted %s", k.Key, k.ID))
		}
	}
	if len(m.Tokens) > 0 {
		n := map[kvstore.Outcome]int{}
		for _, t := range m.Tokens {
			if n[t.Result]++; t.Result == kvstore.Different {
				diff = append(diff, fmt.Sprintf("token %q", t.Name))
			}
		}
		if _, err := fmt.Fprintf(out, "tokens: copied %d, skipped %d, different %d\n", n[kvstore.Copied], n[kvstore.Skipped], n[kvstore.Different]); err != nil {
			return err
		}
	}
	if len(diff) > 0 {
		fmt.Fprintf(errOut, "left as the kv store holds them (they differ from the bolt store): %s\n", strings.Join(diff, ", "))
	}
	return nil
}
