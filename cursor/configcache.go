package cursor

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/jetstream-bridge/bridge/internal/gencache"
)

// configCacheSize bounds how many decoded Configs a DB keeps per
// generation: enough for the registrations of a busy fan-out, while a
// hundred thousand idle ones waking once at start cannot hold their
// Configs in memory.
const configCacheSize = 2048

// configCache holds the decoded Config of recently read rows, by id.
// Every delivery turn reads its row, and decoding the Config's JSON was
// most of that read, although a Config changes only on Create and Replace.
//
// An entry is used only when the stored bytes equal the bytes it was
// decoded from, so a replaced Config is decoded afresh with no
// invalidation to forget. Callers get their own copy: nothing a caller
// does to a Registration reaches the cache.
type configCache = gencache.Cache[string, cachedConfig]

type cachedConfig struct {
	raw string
	cfg Config
}

func newConfigCache() *configCache {
	return gencache.New[string, cachedConfig](configCacheSize)
}

// decodeConfig returns the Config stored as raw under id.
func (db *DB) decodeConfig(id string, raw []byte) (Config, error) {
	e, ok := db.configs.Get(id)
	if !ok || e.raw != string(raw) {
		e = cachedConfig{raw: string(raw)}
		if err := json.Unmarshal(raw, &e.cfg); err != nil {
			return Config{}, err
		}
		db.configs.Put(id, e)
	}
	cfg := e.cfg
	if cfg.Batch != nil {
		b := *cfg.Batch
		cfg.Batch = &b
	}
	return cfg, nil
}

// getRowCached reads and decodes id like getRow, taking its Config from
// the cache when the stored bytes are unchanged.
func (db *DB) getRowCached(tx *bolt.Tx, id string) (row, bool, error) {
	r, ok, err := readRow(tx, id, false)
	if !ok || err != nil {
		return r, ok, err
	}
	ns, raw := r.Namespace, r.config
	cfg, err := db.decodeConfig(id, raw)
	if err != nil {
		return row{}, false, unreadableRow(db.path, id, err)
	}
	r.Config, r.config = cfg, nil
	r.ID, r.Namespace = id, ns
	return r, true, nil
}
