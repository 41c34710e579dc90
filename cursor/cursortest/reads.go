package cursortest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jetstream-bridge/bridge/cursor"
)

// readCases are the listings and the indexes the worker reads: List,
// Due, Routes and the metrics' readers.
var readCases = []testCase{
	{"list pages in id order with filters", listPages},
	{"counts follow every transition", countsFollowTransitions},
	{"backlog counts what active and parked rows owe", backlog},
	{"due does not let another namespace starve this one", dueNamespaces},
	{"due is earliest first and stops at at", dueOrder},
	{"due keeps namespaces that share a prefix apart", duePrefixes},
	{"routes follow the rows", routesFollowRows},
	{"wildcard filters are distinct", wildcardsDistinct},
	{"wake behind wakes only the idle behind", wakeBehind},
	{"make due wakes the idle only", makeDue},
	{"idle floor is the lowest idle cursor", idleFloor},
}

func listPages(e *env) {
	for _, id := range []string{"e", "a", "d", "b", "c", "bb", "bc"} {
		ns := "outbox"
		if id[0] == 'b' || id == "d" {
			ns = "a2a"
		}
		e.create(reg(id, ns))
	}
	e.must(e.s.Park(e.ctx, "c", "gone"))
	for _, tc := range []struct {
		opt      cursor.ListOptions
		want     string
		wantNext string
	}{
		{cursor.ListOptions{}, "a b bb bc c d e", ""},
		{cursor.ListOptions{Limit: 2}, "a b", "b"},
		{cursor.ListOptions{Limit: 2, After: "bc"}, "c d", "d"},
		{cursor.ListOptions{Limit: 2, After: "d"}, "e", ""},
		{cursor.ListOptions{Limit: 2, After: "bd"}, "c d", "d"},
		{cursor.ListOptions{Namespace: "outbox", Limit: 2}, "a c", "c"},
		{cursor.ListOptions{Namespace: "outbox", Limit: 2, After: "c"}, "e", ""},
		{cursor.ListOptions{Namespace: "a2a", Limit: 2}, "b bb", "bb"},
		{cursor.ListOptions{State: cursor.Parked}, "c", ""},
		{cursor.ListOptions{Namespace: "a2a", State: cursor.Parked}, "", ""},
		{cursor.ListOptions{Prefix: "b"}, "b bb bc", ""},
		{cursor.ListOptions{Prefix: "b", Limit: 1}, "b", "b"},
		{cursor.ListOptions{Prefix: "b", Limit: 2}, "b bb", "bb"},
		{cursor.ListOptions{Prefix: "b", Limit: 2, After: "bb"}, "bc", ""},
		{cursor.ListOptions{Prefix: "b", After: "a"}, "b bb bc", ""},
		{cursor.ListOptions{Prefix: "b", After: "b"}, "bb bc", ""},
		{cursor.ListOptions{Prefix: "b", After: "c"}, "", ""},
		{cursor.ListOptions{Prefix: "c", After: "d"}, "", ""},
		{cursor.ListOptions{Prefix: "bb"}, "bb", ""},
		{cursor.ListOptions{Prefix: "bd"}, "", ""},
		{cursor.ListOptions{Prefix: "bz"}, "", ""},
		{cursor.ListOptions{Prefix: "c", State: cursor.Parked}, "c", ""},
		{cursor.ListOptions{Prefix: "e", State: cursor.Parked}, "", ""},
	} {
		rows, next, err := e.s.List(e.ctx, tc.opt)
		e.must(err)
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		if got := strings.Join(ids, " "); got != tc.want || next != tc.wantNext {
			e.t.Errorf("List(%+v) = %q next %q, want %q next %q", tc.opt, got, next, tc.want, tc.wantNext)
		}
	}
}

func countsFollowTransitions(e *env) {
	for _, id := range []string{"a", "b", "c", "d"} {
		e.create(reg(id, "outbox"))
	}
	e.create(reg("t", "a2a"))
	e.must(e.s.Park(e.ctx, "a", "gone"))
	e.advance("b", cursor.Progress{NextSeq: 2, Complete: true})
	e.flush()
	e.must(e.s.Delete(e.ctx, "c"))
	want := map[string]map[cursor.State]int{
		"outbox": {cursor.Active: 1, cursor.Parked: 1, cursor.Completed: 1},
		"a2a":    {cursor.Active: 1},
	}
	if got := e.counts(); !equalCounts(got, want) {
		e.t.Fatalf("Counts = %v, want %v", got, want)
	}
}

func backlog(e *env) {
	for id, next := range map[string]uint64{"o1": 1, "o2": 5, "o3": 3, "o4": 2} {
		r := on(id, "outbox", "journal.x")
		r.NextSeq = next
		e.create(r)
	}
	e.create(reg("t", "a2a"))
	e.must(e.s.Park(e.ctx, "o3", "gone"))
	e.advance("o4", cursor.Progress{NextSeq: 8, Complete: true})
	e.advance("t", cursor.Progress{NextSeq: 2, Complete: true})
	e.advance("o1", cursor.Progress{NextSeq: 2})
	e.flush()
	got, err := as[backlogger](e).Backlog(e.ctx, 10)
	e.must(err)
	// (11-2) + (11-5) + (11-3), the parked one included; the completed
	// ones owe nothing.
	if got["outbox"] != 23 || len(got) != 1 {
		e.t.Fatalf("Backlog = %v, want outbox 23", got)
	}
}

func dueNamespaces(e *env) {
	for i := range 5 {
		e.create(reg(fmt.Sprintf("a2a-%d", i), "a2a"))
	}
	e.create(reg("outbox-0", "outbox"))
	ids, unserved := e.dueIDs(T0, 2, "outbox")
	if !slices.Equal(ids, []string{"outbox-0"}) || unserved != 5 {
		e.t.Fatalf("Due(outbox, limit 2) = %v unserved %d; want [outbox-0] unserved 5", ids, unserved)
	}
	ids, unserved = e.dueIDs(T0, 2, "a2a")
	if len(ids) != 2 || unserved != 1 {
		e.t.Fatalf("Due(a2a, limit 2) = %v unserved %d; want 2 rows, unserved 1", ids, unserved)
	}
	// Rows of the other namespace that are not due yet are not unserved.
	ids, unserved = e.dueIDs(T0.Add(-time.Second), 2, "outbox")
	if len(ids) != 0 || unserved != 0 {
		e.t.Fatalf("Due before anything is due = %v unserved %d", ids, unserved)
	}
}

func dueOrder(e *env) {
	for i, off := range []int{4, 2, 5, 1, 3} {
		r := reg(fmt.Sprintf("r%d", i), "outbox")
		r.NextAttemptAt = T0.Add(time.Duration(off) * time.Second)
		e.create(r)
	}
	if ids, _ := e.dueIDs(T0.Add(3*time.Second), 10, "outbox"); !slices.Equal(ids, []string{"r3", "r1", "r4"}) {
		e.t.Fatalf("Due(t0+3s) = %v, want [r3 r1 r4]", ids)
	}
	if ids, _ := e.dueIDs(T0.Add(time.Hour), 2, "outbox"); !slices.Equal(ids, []string{"r3", "r1"}) {
		e.t.Fatalf("Due(limit 2) = %v, want [r3 r1]", ids)
	}
	if ids, unserved := e.dueIDs(T0.Add(time.Hour), 0, "a2a"); len(ids) != 0 || unserved != 5 {
		e.t.Fatalf("Due(a2a, limit 0) = %v unserved %d; want no rows, unserved 5", ids, unserved)
	}
	if _, unserved := e.dueIDs(T0.Add(2*time.Second), 0, "out"); unserved != 2 {
		e.t.Fatalf("Unserved at t0+2s for a namespace sharing a prefix = %d, want 2", unserved)
	}
	for i := range 3 {
		e.create(reg(fmt.Sprintf("a2a-%d", i), "a2a"))
	}
	if ids, unserved := e.dueIDs(T0, 2, "a2a"); len(ids) != 2 || unserved != 0 {
		e.t.Fatalf("Due(a2a) = %v unserved %d", ids, unserved)
	}
}

func duePrefixes(e *env) {
	e.create(reg("short", "out"))
	e.create(reg("long", "outbox"))
	if ids, unserved := e.dueIDs(T0, 10, "out"); !slices.Equal(ids, []string{"short"}) || unserved != 1 {
		e.t.Fatalf("Due(out) = %v unserved %d", ids, unserved)
	}
	if ids, unserved := e.dueIDs(T0, 10, "outbox"); !slices.Equal(ids, []string{"long"}) || unserved != 1 {
		e.t.Fatalf("Due(outbox) = %v unserved %d", ids, unserved)
	}
}

// A message's subject finds the active registrations of its literal filter
// in the store; parking, completing and deleting take them out, unparking
// and replacing put them back, each in the write that changes the row.
func routesFollowRows(e *env) {
	e.create(on("a", "outbox", "journal.orders.1"))
	e.create(on("b", "a2a", "journal.orders.1"))
	e.create(on("c", "outbox", "journal.orders.10"))
	e.create(on("w", "outbox", "journal.orders.*"))
	e.create(on("v", "outbox", "journal.>"))
	e.create(on("u", "outbox", "journal.*"))
	if got := e.routes("journal.orders.1"); !slices.Equal(got, []string{"outbox/a", "a2a/b"}) {
		e.t.Fatalf("routes of journal.orders.1 = %v", got)
	}
	if got := e.routes("journal.orders.*"); !slices.Equal(got, []string{"outbox/w"}) {
		e.t.Fatalf("routes of the wildcard = %v", got)
	}
	e.must(e.s.Park(e.ctx, "a", "gone"))
	e.advance("b", cursor.Progress{NextSeq: 4, Complete: true})
	e.flush()
	if got := e.routes("journal.orders.1"); len(got) != 0 {
		e.t.Fatalf("a parked and a completed registration still routed: %v", got)
	}
	e.check()
	_, err := e.s.Unpark(e.ctx, "a", T0)
	e.must(err)
	_, err = e.s.Replace(e.ctx, on("c", "outbox", "journal.orders.1").Config, T0)
	e.must(err)
	if got := e.routes("journal.orders.1"); !slices.Equal(got, []string{"outbox/a", "outbox/c"}) {
		e.t.Fatalf("after unpark and replace: %v", got)
	}
	if got := e.routes("journal.orders.10"); len(got) != 0 {
		e.t.Fatalf("the replaced filter still routes: %v", got)
	}
	e.must(e.s.Delete(e.ctx, "w"))
	var wild []string
	e.must(e.s.WildcardFilters(e.ctx, func(f string) { wild = append(wild, f) }))
	if !slices.Equal(wild, []string{"journal.*", "journal.>"}) {
		e.t.Fatalf("wildcard filters after the delete = %v", wild)
	}
}

func wildcardsDistinct(e *env) {
	for i, f := range []string{"journal.>", "journal.*.x", "journal.>", "journal.a.b", "journal.*.x", "journal.*"} {
		e.create(on(string(rune('a'+i)), "outbox", f))
	}
	var got []string
	e.must(e.s.WildcardFilters(e.ctx, func(f string) { got = append(got, f) }))
	if !slices.Equal(got, []string{"journal.*", "journal.*.x", "journal.>"}) {
		e.t.Fatalf("wildcard filters = %v", got)
	}
}

// WakeBehind makes due the idle registrations whose cursor is below the
// sequence the bridge starts following at, judged by acknowledged
// progress too, and leaves the rest idle.
func wakeBehind(e *env) {
	for _, id := range []string{"behind", "level", "ahead", "acked", "parked"} {
		e.create(on(id, "outbox", "journal."+id))
	}
	e.create(on("a2a-behind", "a2a", "journal.a2a.t"))
	for id, next := range map[string]uint64{"behind": 3, "level": 10, "ahead": 12, "acked": 4, "parked": 2, "a2a-behind": 9} {
		e.advance(id, cursor.Progress{NextSeq: next, Idle: true})
	}
	e.flush()
	e.must(e.s.Park(e.ctx, "parked", "gone"))
	// Acknowledged, not flushed: caught up past 10 by now.
	e.advance("acked", cursor.Progress{NextSeq: 11, Idle: true})
	n, err := e.s.WakeBehind(e.ctx, 10)
	e.must(err)
	due, _ := e.dueIDs(T0.Add(time.Second), 100, "outbox")
	a2a, _ := e.dueIDs(T0.Add(time.Second), 100, "a2a")
	if n != 2 || !slices.Equal(due, []string{"behind"}) || !slices.Equal(a2a, []string{"a2a-behind"}) {
		e.t.Fatalf("woke %d: due outbox %v, a2a %v; want behind and a2a-behind", n, due, a2a)
	}
	if r := e.get("behind"); r.NextSeq != 3 || r.State != cursor.Active {
		e.t.Fatalf("a woken registration moved: %+v", r)
	}
	e.check()
	if n, err := e.s.WakeBehind(e.ctx, 10); err != nil || n != 0 {
		e.t.Fatalf("second WakeBehind woke %d (%v); the due ones are not idle", n, err)
	}
}

// MakeDue makes idle registrations due and leaves the others' times alone:
// one backing off keeps its backoff, a parked one stays parked.
func makeDue(e *env) {
	for _, id := range []string{"idle", "backoff", "parked"} {
		e.create(on(id, "outbox", "journal."+id))
		e.advance(id, cursor.Progress{NextSeq: 5, Idle: true})
	}
	e.flush()
	e.must(e.s.Retry(e.ctx, "backoff", T0.Add(time.Hour), "503"))
	e.must(e.s.Park(e.ctx, "parked", "gone"))
	e.must(e.s.MakeDue(e.ctx, []string{"idle", "backoff", "parked", "missing"}))
	if got := e.get("idle").NextAttemptAt; !got.Equal(T0) {
		e.t.Errorf("idle registration due at %v, want now (%v)", got, T0)
	}
	if got := e.get("backoff").NextAttemptAt; !got.Equal(T0.Add(time.Hour)) {
		e.t.Errorf("backing-off registration due at %v, want its backoff's end", got)
	}
	if r := e.get("parked"); r.State != cursor.Parked || !r.NextAttemptAt.IsZero() {
		e.t.Errorf("parked registration became %s due at %v", r.State, r.NextAttemptAt)
	}
}

func idleFloor(e *env) {
	f := as[idleFloorer](e)
	if _, ok, err := f.IdleFloor(e.ctx); err != nil || ok {
		e.t.Fatalf("IdleFloor of an empty store: ok %v, %v", ok, err)
	}
	for id, next := range map[string]uint64{"o1": 9, "o2": 4, "parked": 2} {
		e.create(on(id, "outbox", "journal."+id))
		e.advance(id, cursor.Progress{NextSeq: next, Idle: true})
	}
	e.create(on("a1", "a2a", "journal.a2a.t"))
	e.advance("a1", cursor.Progress{NextSeq: 6, Idle: true})
	e.create(on("due", "outbox", "journal.due")) // due, not idle, at 0
	e.must(e.s.Park(e.ctx, "parked", "gone"))
	// Acknowledged, not flushed yet: IdleFloor flushes first.
	e.advance("o2", cursor.Progress{NextSeq: 5, Idle: true})
	if floor, ok, err := f.IdleFloor(e.ctx); err != nil || !ok || floor != 5 {
		e.t.Fatalf("IdleFloor = %d, %v, %v; want 5 (o2's cursor, parked and due rows aside)", floor, ok, err)
	}
}
