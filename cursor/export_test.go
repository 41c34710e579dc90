package cursor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// CloseWithoutFlush closes the file the way a crash leaves it: progress
// acknowledged since the last Flush is lost.
func (db *DB) CloseWithoutFlush() error {
	db.closeOnce.Do(func() {
		db.haltFlusher()
		db.closeErr = db.bolt.Close()
	})
	return db.closeErr
}

// HoldWriteTurn takes the write turn, so grouped writes queue behind it,
// and returns what the caller that gets the turn next does: commit every
// queued write as one group and give the turn back.
func (db *DB) HoldWriteTurn() (commitQueued func()) {
	db.write <- struct{}{}
	return func() {
		db.commitQueued()
		db.release()
	}
}

// Queued is how many grouped writes wait for the write turn.
func (db *DB) Queued() int {
	db.queue.mu.Lock()
	defer db.queue.mu.Unlock()
	return len(db.queue.calls)
}

// SetMaxSizeForTest caps the file (0: no cap), so a test can make commits
// fail the way a full disk does.
func (db *DB) SetMaxSizeForTest(n int) { db.bolt.MaxSize = n }

// InsertForTest stores rows exactly as given (state, times, cursor), in
// transactions of 10,000, for fixtures too large to build one Create at a
// time.
func (db *DB) InsertForTest(rows []Registration) error {
	for chunk := range slices.Chunk(rows, 10_000) {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			regs := tx.Bucket([]byte(bucketRegistrations))
			for i := range chunk {
				inc, err := regs.NextSequence()
				if err != nil {
					return err
				}
				if err := putRow(tx, nil, &row{inc: inc, Registration: chunk[i]}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckIndexes derives every index, the counts and the sums from the rows
// and reports every difference from what is stored.
func (db *DB) CheckIndexes() error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		due, done, counts := map[string]string{}, map[string]string{}, map[string]uint64{}
		idle, sums := map[string]string{}, map[string]uint64{}
		routes := map[string]map[string]string{bucketRoutes: {}, bucketWildRoutes: {}}
		err := tx.Bucket([]byte(bucketRegistrations)).ForEach(func(k, v []byte) error {
			r, err := decodeRow(db.path, k, v, true)
			if err != nil {
				return err
			}
			if dk := dueKey(&r.Registration); dk != nil {
				due[string(dk)] = ""
			}
			if ik := idleKey(&r.Registration); ik != nil {
				idle[string(ik)] = ""
			}
			if b, rk := routeKey(&r.Registration); rk != nil {
				routes[b][string(rk)] = r.Namespace
			}
			if ck := completedKey(&r.Registration); ck != nil {
				done[string(ck)] = r.Namespace
			}
			counts[string(append(nsPrefix(r.Namespace), r.State...))]++
			if r.State != Completed && r.NextSeq != 0 {
				sums[string(append(nsPrefix(r.Namespace), r.State...))] += r.NextSeq
			}
			return nil
		})
		if err != nil {
			return err
		}
		var problems []string
		problems = append(problems, diffKeys(tx, bucketDue, due)...)
		problems = append(problems, diffKeys(tx, bucketIdle, idle)...)
		problems = append(problems, diffKeys(tx, bucketRoutes, routes[bucketRoutes])...)
		problems = append(problems, diffKeys(tx, bucketWildRoutes, routes[bucketWildRoutes])...)
		problems = append(problems, diffKeys(tx, bucketCompleted, done)...)
		problems = append(problems, diffCounts(tx, bucketCounts, counts)...)
		problems = append(problems, diffCounts(tx, bucketSums, sums)...)
		if len(problems) > 0 {
			return fmt.Errorf("indexes disagree with rows:\n%s", strings.Join(problems, "\n"))
		}
		return nil
	})
}

func diffKeys(tx *bolt.Tx, bucket string, want map[string]string) []string {
	var problems []string
	got := map[string]bool{}
	_ = tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
		got[string(k)] = true
		if w, ok := want[string(k)]; !ok || w != string(v) {
			problems = append(problems, fmt.Sprintf("%s holds %q → %q, which no row implies", bucket, k, v))
		}
		return nil
	})
	for k := range want {
		if !got[k] {
			problems = append(problems, fmt.Sprintf("%s lacks %q", bucket, k))
		}
	}
	slices.Sort(problems)
	return problems
}

func diffCounts(tx *bolt.Tx, bucket string, want map[string]uint64) []string {
	var problems []string
	got := map[string]uint64{}
	_ = tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
		got[string(k)] = binary.BigEndian.Uint64(v)
		return nil
	})
	for k, n := range want {
		if got[k] != n {
			problems = append(problems, fmt.Sprintf("%s %q is %d, rows say %d", bucket, k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s %q is %d, rows say 0", bucket, k, n))
		}
	}
	return problems
}

// DowngradeToSchema1 makes the file at path what a bridge of store schema
// version 1 wrote: without the buckets version 2 added.
func DowngradeToSchema1(path string) error {
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		for _, name := range bucketsV2() {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchemaKey), []byte("1"))
	})
	return errors.Join(err, bdb.Close())
}
