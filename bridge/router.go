package bridge

import (
	"strings"
	"sync"

	"github.com/jetstream-bridge/bridge/journal"
)

// router maps a journal subject to the registrations whose filter matches
// it, so a published message wakes exactly the registrations it concerns.
//
// Literal filters (every a2a registration's, most outbox ones) are a map
// lookup; only wildcard filters are matched one by one. Entries are hints:
// a stale one costs a store read when its wake is served, never a wrong
// delivery, and is removed when its turn finds the row gone or inactive.
type router struct {
	mu       sync.RWMutex
	literal  map[string]map[string]string // subject → id → namespace
	wildcard map[string]map[string]string // filter → id → namespace
	filterOf map[string]string            // id → filter
}

func newRouter() *router {
	return &router{
		literal:  make(map[string]map[string]string),
		wildcard: make(map[string]map[string]string),
		filterOf: make(map[string]string),
	}
}

func isWildcard(filter string) bool {
	for _, tok := range strings.Split(filter, ".") {
		if tok == "*" || tok == ">" {
			return true
		}
	}
	return false
}

func (r *router) add(id, ns, filter string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(id)
	table := r.literal
	if isWildcard(filter) {
		table = r.wildcard
	}
	ids := table[filter]
	if ids == nil {
		ids = make(map[string]string)
		table[filter] = ids
	}
	ids[id] = ns
	r.filterOf[id] = filter
}

func (r *router) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(id)
}

func (r *router) removeLocked(id string) {
	filter, ok := r.filterOf[id]
	if !ok {
		return
	}
	delete(r.filterOf, id)
	for _, table := range []map[string]map[string]string{r.literal, r.wildcard} {
		if ids := table[filter]; ids != nil {
			delete(ids, id)
			if len(ids) == 0 {
				delete(table, filter)
			}
		}
	}
}

// match calls fn for every registration whose filter matches subject.
func (r *router) match(subject string, fn func(id, ns string)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for id, ns := range r.literal[subject] {
		fn(id, ns)
	}
	for filter, ids := range r.wildcard {
		if !journal.SubjectMatches(filter, subject) {
			continue
		}
		for id, ns := range ids {
			fn(id, ns)
		}
	}
}

// all calls fn for every routed registration.
func (r *router) all(fn func(id, ns string)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, table := range []map[string]map[string]string{r.literal, r.wildcard} {
		for _, ids := range table {
			for id, ns := range ids {
				fn(id, ns)
			}
		}
	}
}
