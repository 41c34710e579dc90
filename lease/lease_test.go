package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetstream-bridge/bridge/internal/testutil"
)

// ShardOf is part of the stored layout: its values never change (FNV-1a
// 64 and splitmix64's finaliser, computed apart).
func TestShardOfIsStable(t *testing.T) {
	for id, want := range map[string]int{"orders": 41, "a": 56, "": 27} {
		if got := ShardOf(id, 64); got != want {
			t.Errorf("ShardOf(%q, 64) = %d, want %d", id, got, want)
		}
	}
	for i := range 1000 {
		if s := ShardOf(fmt.Sprint(i), 7); s < 0 || s >= 7 {
			t.Fatalf("ShardOf(%d, 7) = %d, outside [0, 7)", i, s)
		}
	}
}

// Every member computes the same split from any order of the same list:
// each shard has one owner, and each member an equal share ±1.
func TestSplitIsOneFairAnswer(t *testing.T) {
	for n := 1; n <= 9; n++ {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("bridge-%d", i))
		}
		count := make([]int, testShards)
		for _, self := range names {
			mine := split(testShards, self, names)
			rev := slices.Clone(names)
			slices.Reverse(rev)
			if other := split(testShards, self, rev); !equalSets(mine, other) {
				t.Fatalf("%d members: %s's split depends on the list's order", n, self)
			}
			if lo, hi := testShards/n, (testShards+n-1)/n; len(mine) < lo || len(mine) > hi {
				t.Errorf("%d members: %s holds %d shards, want %d to %d", n, self, len(mine), lo, hi)
			}
			for s := range mine {
				count[s]++
			}
		}
		for s, c := range count {
			if c != 1 {
				t.Fatalf("%d members: shard %d has %d owners", n, s, c)
			}
		}
	}
}

func equalSets(a, b map[int]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.Instance is empty"},
		{Config{Instance: "a.b"}, `Config.Instance "a.b"`},
		{Config{Instance: "a", Bucket: "x y"}, `Config.Bucket "x y"`},
		{Config{Instance: "a", Shards: -1}, "Config.Shards -1"},
		{Config{Instance: "a", TTL: time.Millisecond}, "Config.TTL 1ms"},
		{Config{Instance: "a", Replicas: 7}, "Config.Replicas 7"},
	} {
		_, err := Join(context.Background(), nil, tc.cfg)
		wantErr(t, fmt.Sprintf("Join(%+v)", tc.cfg), err, tc.want)
	}
}

// One server cannot hold three replicas, and a bucket made with one TTL
// refuses members counting another.
func TestJoinRefusesWhatTheServerCannotKeep(t *testing.T) {
	srv := testutil.NATS(t, t.TempDir(), -1)
	js := testutil.JetStream(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Join(ctx, js, Config{Instance: "a", Bucket: "T", TTL: testTTL})
	wantErr(t, "R3 on one server", err, "--kv-replicas 3 but the NATS cluster has 1 server")
	m, err := Join(ctx, js, Config{Instance: "a", Bucket: "T", TTL: testTTL, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, m)
	_, err = Join(ctx, js, Config{Instance: "b", Bucket: "T", TTL: 3 * time.Second, Replicas: 1})
	wantErr(t, "TTL mismatch", err, "bucket T_members keeps keys 2s but the lease TTL is 3s")
}

// Three bridges starting together on a fresh cluster create the buckets
// once, own every shard between them fairly, and list each other.
func TestThreeMembersOwnEveryShard(t *testing.T) {
	c, ms := threeMembers(t)
	for _, m := range ms {
		select { // signalled at the end of the round that took them
		case <-m.Changes():
		case <-time.After(testTTL):
			t.Errorf("%s: no change signalled after taking shards", m.cfg.Instance)
		}
		if st := m.Stats(); st.Held != len(m.Shards()) || st.Takeovers < uint64(st.Held) {
			t.Errorf("%s: stats %+v, holding %d", m.cfg.Instance, st, len(m.Shards()))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A member renewed during a read may be missing from it (see
	// Members): read again until one read shows all three.
	var infos []MemberInfo
	for {
		var err error
		if infos, err = ms[0].Members(ctx); err != nil {
			t.Fatal(err)
		}
		if len(infos) == 3 || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var total int
	for i, info := range infos {
		want := fmt.Sprintf("m%d", i+1)
		if info.Name != want || info.Since.IsZero() || !slices.Equal(info.Shards, ms[i].Shards()) {
			t.Errorf("member %d: %+v, want %s since its join holding %v", i, info, want, ms[i].Shards())
		}
		total += len(info.Shards)
	}
	if len(infos) != 3 || total != testShards {
		t.Errorf("Members lists %d members holding %d shards, want 3 holding %d", len(infos), total, testShards)
	}

	_, err := Join(ctx, testutil.JetStream(t, c.ClientURLs()), Config{Instance: "m9", Bucket: "T5", TTL: testTTL, Replicas: 5})
	wantErr(t, "R5 on three servers", err, "--kv-replicas 5 but the NATS cluster has 3 servers")
}

// A member that closes hands its shards over at once and frees its name.
func TestCloseHandsOverAtOnce(t *testing.T) {
	c, ms := threeMembers(t)
	closeMember(t, ms[2])
	if s := ms[2].Shards(); len(s) != 0 {
		t.Errorf("closed member still owns %v", s)
	}
	for range ms[2].Changes() { // a last signal, then closed
	}
	// CONTRACT §6: another live owner within 1 s of the exit, whatever the TTL.
	took := eventually(t, time.Second, "the two left own every shard", func() bool { return fair(ms[:2]) })
	t.Logf("shards handed over %v after Close (TTL %v)", took, testTTL)
	again := join(t, c, testConfig("m3"))
	eventually(t, 2*testTTL, "the name closed rejoins and gets its share back", func() bool {
		return fair([]*Member{ms[0], ms[1], again})
	})
}

// A paused member stops claiming its shards before its leases can expire,
// and the others take them within 2 × TTL.
func TestStalledMemberIsReplaced(t *testing.T) {
	c := testutil.Cluster(t, 3)
	ms := joinAll(t, c, 2)
	stall := make(chan struct{})
	cfg := testConfig("m3")
	cfg.stalled = stall
	ms = append(ms, join(t, c, cfg))
	guard(t, ms...)
	eventually(t, 2*testTTL, "a fair split of three", func() bool { return fair(ms) })
	stalledAt := time.Now()
	close(stall)
	quiet := eventually(t, testTTL, "the stalled member owns nothing", func() bool { return len(ms[2].Shards()) == 0 })
	took := eventually(t, 2*testTTL-time.Since(stalledAt), "the others own every shard", func() bool { return fair(ms[:2]) })
	t.Logf("stalled member silent after %v, shards taken over %v after the stall (TTL %v)", quiet, took+quiet, testTTL)
	if st := ms[0].Stats(); st.Takeovers == 0 {
		t.Errorf("m1 took shards but counts no takeover: %+v", st)
	}
	js := testutil.JetStream(t, c.ClientURLs())
	var again *Member
	eventually(t, 2*testTTL-time.Since(stalledAt), "the stalled member's name free again", func() bool {
		m, err := Join(context.Background(), js, testConfig("m3"))
		if err != nil && !errors.Is(err, ErrInstanceTaken) {
			t.Fatalf("join m3 again: %v", err)
		}
		again = m
		return err == nil
	})
	closeMember(t, again)
}

// A second live member with one name is refused, naming it; the name is
// free again once the first closes.
func TestSameNameIsRefused(t *testing.T) {
	c := testutil.Cluster(t, 3)
	first := join(t, c, testConfig("bridge-a"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := testutil.JetStream(t, c.ClientURLs())
	_, err := Join(ctx, js, testConfig("bridge-a"))
	if !errors.Is(err, ErrInstanceTaken) || !strings.Contains(err.Error(), `"bridge-a"`) {
		t.Fatalf("second bridge-a: %v, want ErrInstanceTaken naming it", err)
	}
	closeMember(t, first)
	second, err := Join(ctx, js, testConfig("bridge-a"))
	if err != nil {
		t.Fatalf("bridge-a after the first closed: %v", err)
	}
	closeMember(t, second)
}

// A fourth member joining gets a fair share within 2 × TTL.
func TestFourthMemberGetsFairShare(t *testing.T) {
	c := testutil.Cluster(t, 3)
	ms := joinAll(t, c, 3)
	eventually(t, 2*testTTL, "a fair split of three", func() bool { return fair(ms) })
	ms = append(ms, join(t, c, testConfig("m4")))
	guard(t, ms...)
	took := eventually(t, 2*testTTL, "a fair split of four", func() bool { return fair(ms) })
	t.Logf("fourth member holds %d shards %v after joining", len(ms[3].Shards()), took)
}

// The node leading the leases stream dies: after the election every shard
// is owned again, never by two members at once. Renewals may fail for the
// election's seconds, which is why the TTL must exceed an election.
func TestLeasesContinueAfterLeaderLoss(t *testing.T) {
	c, ms := threeMembers(t)
	leader := c.StreamLeader("KV_T_leases")
	c.Stop(leader)
	stopped := time.Now()
	// Owns lapses within a TTL without renewals: a split still whole a TTL
	// after the loss has been renewed through the new leader.
	took := eventually(t, 30*time.Second, "every shard owned again after the election", func() bool {
		return time.Since(stopped) > testTTL && fair(ms)
	})
	var failed uint64
	for _, m := range ms {
		failed += m.Stats().RenewalsFailed
	}
	t.Logf("split whole %v after stopping node %d; %d renewals failed meanwhile", took, leader, failed)
	// Holder is for display, yet must not stay stale: each member's
	// watch of the leases follows the new leader too.
	eventually(t, 2*testTTL, "every member to name each shard's owner", func() bool { return holdersShown(ms) })
	c.Restart(leader)
}

// holdersShown reports whether every member names each shard's owner as
// its holder.
func holdersShown(ms []*Member) bool {
	for s, o := range owners(ms) {
		if len(o) != 1 {
			return false
		}
		for _, m := range ms {
			if m.Holder(s) != ms[o[0]].cfg.Instance {
				return false
			}
		}
	}
	return true
}

// A member handing shards to a newcomer settles each first: BeforeRelease
// sees shards the member no longer owns whose leases still name it, and
// the newcomer takes them only after it returned.
func TestReleaseWaitsForBeforeRelease(t *testing.T) {
	c := testutil.Cluster(t, 3)
	var (
		mu       sync.Mutex
		released = map[int]bool{}
		wrong    []string
		first    *Member
	)
	cfg := testConfig("m1")
	cfg.BeforeRelease = func(ctx context.Context, shards []int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range shards {
			if _, owned := first.Owns(s); owned {
				wrong = append(wrong, fmt.Sprintf("shard %d still owned", s))
			}
		}
		mu.Unlock()
		// A slow settle: the newcomer must not hold these meanwhile.
		time.Sleep(testTTL / 8)
		mu.Lock()
		for _, s := range shards {
			released[s] = true
		}
	}
	mu.Lock()
	first = join(t, c, cfg)
	mu.Unlock()
	eventually(t, 2*testTTL, "m1 holding every shard", func() bool { return len(first.Shards()) == testShards })
	second := join(t, c, testConfig("m2"))
	eventually(t, 2*testTTL, "a fair split of two", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range second.Shards() {
			if !released[s] {
				wrong = append(wrong, fmt.Sprintf("m2 holds shard %d before m1 settled it", s))
			}
		}
		return fair([]*Member{first, second})
	})
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Fatal(wrong[0])
	}
}

// splitShares returns each member's registrations under splitWeighted,
// and fails when a shard has no owner or two.
func splitShares(t *testing.T, weights []int, names []string) map[string]int {
	t.Helper()
	owner := make(map[int]string)
	load := make(map[string]int)
	for _, n := range names {
		for s := range splitWeighted(weights, n, names) {
			if o, ok := owner[s]; ok {
				t.Fatalf("shard %d given to %s and %s", s, o, n)
			}
			owner[s] = n
			load[n] += weights[s]
		}
	}
	if len(owner) != len(weights) {
		t.Fatalf("%d of %d shards have an owner", len(owner), len(weights))
	}
	return load
}

// The split balances registrations, not shards: six registrations over
// three members are two each wherever they fall, and many registrations
// are within §6's bound (20 % of an equal share, ± 1).
func TestSplitBalancesRegistrations(t *testing.T) {
	names := []string{"b1", "b2", "b3"}
	w := make([]int, testShards)
	for _, s := range []int{3, 17, 18, 40, 41, 42} {
		w[s] = 1
	}
	if load := splitShares(t, w, names); load["b1"] != 2 || load["b2"] != 2 || load["b3"] != 2 {
		t.Fatalf("six registrations split %v, want 2/2/2", load)
	}
	four := append(names, "b4")
	for n, got := range splitShares(t, w, four) {
		if got != 1 && got != 2 {
			t.Fatalf("six registrations over four members: %s holds %d, want 1 or 2", n, got)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ regs, members int }{{30, 4}, {1000, 3}, {1_000_000, 5}} {
		w := make([]int, DefaultShards)
		for range tc.regs {
			w[rng.IntN(len(w))]++
		}
		var names []string
		for i := range tc.members {
			names = append(names, fmt.Sprintf("m%d", i))
		}
		equal := float64(tc.regs) / float64(tc.members)
		for n, got := range splitShares(t, w, names) {
			if d := float64(got) - equal; d > 0.2*equal+1 || -d > 0.2*equal+1 {
				t.Errorf("%d registrations over %d members: %s holds %d, equal share %.1f", tc.regs, tc.members, n, got, equal)
			}
		}
	}
}

// One registration more moves few shards: the split is stable, not a
// reshuffle.
func TestSplitWeightedMovesLittleForOneRegistration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"a", "b", "c", "d"}
	w := make([]int, DefaultShards)
	for range 1000 {
		w[rng.IntN(len(w))]++
	}
	before := splitWeighted(w, "a", names)
	w[rng.IntN(len(w))]++
	after := splitWeighted(w, "a", names)
	moved := 0
	for s := range before {
		if !after[s] {
			moved++
		}
	}
	for s := range after {
		if !before[s] {
			moved++
		}
	}
	t.Logf("one registration more moved %d of member a's shards", moved)
	if moved > len(before)/2 {
		t.Errorf("one registration more moved %d of a's %d shards", moved, len(before))
	}
}
