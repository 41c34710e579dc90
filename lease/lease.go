// Package lease divides a fixed number of shards among the live bridges
// on one NATS cluster, so that each registration (by ShardOf its id) is
// delivered by one bridge at a time, and a bridge that dies or is cut off
// is replaced within two lease TTLs.
//
// It uses NATS's own mechanisms only: two replicated JetStream key-value
// buckets whose TTL is the lease TTL, one key per live member and one per
// held shard, every write a compare-and-set on the key's revision. Which
// shards a member should hold follows from the live members by rendezvous
// hashing, so every member computes the same split without talking to the
// others; the server's revision checks, not that agreement, keep two
// members from holding one shard.
//
// A member claims a shard (Owns) only while its last renewal is younger,
// by its own monotonic clock, than the TTL minus a margin, so it stops
// before the server can expire the lease and give it to another.
//
// The package never reads the journal or the store of registrations and
// knows nothing of HTTP: it answers "which shards are mine", nothing else.
package lease

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
)

// ShardOf returns the shard of a registration id among shards. The hash
// is part of the stored layout: changing it moves every registration to
// another shard, so it never changes.
func ShardOf(id string, shards int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(mix(h.Sum64()) % uint64(shards))
}

// weight is shard's rendezvous weight for member: the member with the
// highest weight should hold the shard. A member joining or leaving moves
// only the shards it wins or held, about 1/n of them.
func weight(shard int, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(shard))
	h.Write(b[:])
	return mix(h.Sum64())
}

// mix is splitmix64's finaliser: FNV-1a alone spreads short, similar
// inputs (shard numbers, names differing in a digit) poorly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// split returns the shards self should hold among members (self
// included whether or not it is listed). It is rendezvous hashing with
// bounded load: each shard goes to the member of highest weight that has
// room, room being shards/n, and shards/n+1 for the first shards%n members
// to reach it. So every member holds an equal share or one more whatever
// the names, and a join or a departure moves few shards. Every member
// computes the same split from the same list.
func split(shards int, self string, members []string) map[int]bool {
	live := set(members)
	live[self] = true
	all := make([]int, shards)
	for s := range all {
		all[s] = s
	}
	return splitOf(all, self, slices.Sorted(maps.Keys(live)))
}

// splitOf is split over the listed shards only, among sorted names.
func splitOf(shards []int, self string, names []string) map[int]bool {
	quota, extra := len(shards)/len(names), len(shards)%len(names)
	load := make(map[string]int, len(names))
	mine := make(map[int]bool)
	for _, s := range shards {
		best := heaviest(s, names, func(m string) bool {
			return load[m] < quota || (load[m] == quota && extra > 0)
		})
		if load[best] == quota {
			extra--
		}
		load[best]++
		if best == self {
			mine[s] = true
		}
	}
	return mine
}

// split is the split of the shards among names, balanced by the
// registrations the shards hold when the member knows them.
func (m *Member) split(names []string) map[int]bool {
	var w []int
	if m.cfg.Weights != nil {
		w = m.cfg.Weights()
	}
	if len(w) != m.cfg.Shards {
		return split(m.cfg.Shards, m.cfg.Instance, names)
	}
	return splitWeighted(w, m.cfg.Instance, names)
}

// splitWeighted returns the shards self should hold among members when
// shard s holds weights[s] registrations. The shards holding any are
// dealt first, heaviest first (ties by shard), each to the member of
// highest rendezvous weight whose registrations stay within an equal
// share (or one more, for as many members as the division leaves over),
// or else to the least loaded; the empty shards are
// then split as split splits all of them, so registrations created later
// still fall evenly. Every member computes the same split from the same
// weights and list; a member's registrations differ from an equal share
// by less than one shard's.
func splitWeighted(weights []int, self string, members []string) map[int]bool {
	live := set(members)
	live[self] = true
	names := slices.Sorted(maps.Keys(live))
	total := 0
	var held, empty []int
	for s, w := range weights {
		if w > 0 {
			total += w
			held = append(held, s)
		} else {
			empty = append(empty, s)
		}
	}
	slices.SortStableFunc(held, func(a, b int) int { return weights[b] - weights[a] })
	// As split's room: an equal share, or one more for the first
	// total%n members to need it.
	quota, extra := total/len(names), total%len(names)
	load := make(map[string]int, len(names))
	mine := make(map[int]bool)
	for _, s := range held {
		w := weights[s]
		best := heaviest(s, names, func(m string) bool {
			return load[m]+w <= quota || load[m]+w == quota+1 && extra > 0
		})
		if best == "" {
			best = lightest(s, names, load)
		}
		if load[best] <= quota && load[best]+w > quota {
			extra--
		}
		load[best] += w
		if best == self {
			mine[s] = true
		}
	}
	for s := range splitOf(empty, self, names) {
		mine[s] = true
	}
	return mine
}

// heaviest is the member of highest rendezvous weight for shard s among
// those ok accepts; "" when it accepts none.
func heaviest(s int, names []string, ok func(string) bool) string {
	var best string
	var bw uint64
	for _, m := range names {
		if w := weight(s, m); ok(m) && (best == "" || w > bw) {
			best, bw = m, w
		}
	}
	return best
}

// lightest is the member with the fewest registrations, ties broken by
// rendezvous weight for shard s.
func lightest(s int, names []string, load map[string]int) string {
	least := load[names[0]]
	for _, m := range names {
		least = min(least, load[m])
	}
	return heaviest(s, names, func(m string) bool { return load[m] == least })
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
