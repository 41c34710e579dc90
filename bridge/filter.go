package bridge

import (
	"fmt"
	"sync"
	"time"

	"cel.dev/cel-go/common/types/ref"

	"github.com/jetstream-bridge/bridge/cursor"
	"github.com/jetstream-bridge/bridge/filter"
	"github.com/jetstream-bridge/bridge/internal/gencache"
	"github.com/jetstream-bridge/bridge/projection"
)

// A registration's filter (CONTRACT §13) is run on a message before it is
// projected: a message it answers false for, or fails on, is passed over
// as if its receiver had acknowledged it, the cursor (and a keyed
// registration's window) moving past it.

// programCacheSize bounds the compiled filters held, by expression: a
// thousand registrations with one filter compile it once.
const programCacheSize = 1024

// filterLogEvery is how often a registration's failing filter is logged.
const filterLogEvery = time.Minute

// filters holds what the worker's filters share: compiled programs, and
// per journal message its input and its parsed data, so a message is
// described once per target shape and parsed once, however many
// registrations filter it, and never for one that none filters.
type filters struct {
	programs *gencache.Cache[string, *filter.Program]
	inputs   *gencache.Cache[cacheKey, *once[*filter.Input]]
	parsed   *gencache.Cache[recordKey, *once[ref.Val]]

	// made serialises the misses of inputs and parsed, so concurrent
	// turns wanting one entry make it once.
	made sync.Mutex

	mu     sync.Mutex
	logged map[string]time.Time
}

// once is a cache entry made by the first caller that needs it; the
// others wait for it.
type once[V any] struct {
	done sync.Once
	v    V
	err  error
}

// getOnce returns c's entry for k, made by mk once however many callers
// ask at once.
func getOnce[K comparable, V any](c *gencache.Cache[K, *once[V]], made *sync.Mutex, k K, mk func() (V, error)) (V, error) {
	e, ok := c.Get(k)
	if !ok {
		made.Lock()
		if e, ok = c.Get(k); !ok {
			e = &once[V]{}
			c.Put(k, e)
		}
		made.Unlock()
	}
	e.done.Do(func() { e.v, e.err = mk() })
	return e.v, e.err
}

// parseJSON parses a message's JSON data for filters (a variable so a
// test can count the parses).
var parseJSON = filter.ParseJSON

// recordKey is a journal message's identity (see cacheKey).
type recordKey struct {
	stream string
	seq    uint64
	stored int64
}

func newFilters() *filters {
	return &filters{
		programs: gencache.New[string, *filter.Program](programCacheSize),
		inputs:   gencache.New[cacheKey, *once[*filter.Input]](projectionCacheSize),
		parsed:   gencache.New[recordKey, *once[ref.Val]](projectionCacheSize),
		logged:   make(map[string]time.Time),
	}
}

// program is expr compiled, once per expression.
func (f *filters) program(expr string) (*filter.Program, error) {
	if p, ok := f.programs.Get(expr); ok {
		return p, nil
	}
	p, err := filter.Compile(expr)
	if err != nil {
		return nil, err
	}
	f.programs.Put(expr, p)
	return p, nil
}

// shouldLog reports whether id's filter failure is to be logged now: at
// most once per filterLogEvery per registration.
func (f *filters) shouldLog(id string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if last, ok := f.logged[id]; ok && now.Sub(last) < filterLogEvery {
		return false
	}
	if len(f.logged) >= programCacheSize {
		for k, at := range f.logged {
			if now.Sub(at) >= filterLogEvery {
				delete(f.logged, k)
			}
		}
	}
	f.logged[id] = now
	return true
}

// screened counts what a filter passed over and the cursor has not yet
// been advanced past.
type screened struct {
	filtered, failed uint64
	lastErr          string
}

// add counts one verdict other than deliver; a removed message is counted
// as skipped where it was found (removedFromStream), not here.
func (s *screened) add(v verdict) {
	switch {
	case v.removed:
		return
	case v.err == "":
		s.filtered++
		return
	}
	s.failed++
	s.lastErr = v.err
}

// remover is a journal that knows which messages the stream no longer
// holds (journal.Reader.Removed).
type remover interface {
	Removed(seq uint64) bool
}

// removedFromStream reports whether the stream removed seq after it was
// read (an operator's delete, a purge, its limits), counting and logging
// it as skipped for registration id: a page or a keyed turn may hold a
// message longer than the stream does, and it must not be POSTed then
// (CONTRACT §5).
func (w *Worker) removedFromStream(id string, seq uint64) bool {
	r, ok := w.journal.(remover)
	if !ok || !r.Removed(seq) {
		return false
	}
	w.log.Warn("journal message removed by the stream before delivery; skipping it", "registration", id, "seq", seq)
	w.metrics.skipped(w.ns, 1)
	w.events.skipped(id, seq, seq)
	return true
}

// merge adds what o counted, o being the later.
func (s *screened) merge(o screened) {
	s.filtered += o.filtered
	s.failed += o.failed
	if o.lastErr != "" {
		s.lastErr = o.lastErr
	}
}

// verdict is what a registration's filter says of one message: deliver
// it, or pass it over (err says why, when the filter failed on it;
// removed, when the stream no longer holds it, whatever a filter says).
type verdict struct {
	deliver bool
	err     string
	removed bool
}

// screen runs reg's filter on rec. An error means the registration
// cannot go on with rec (its filter no longer compiles, or rec cannot be
// described, which Project would refuse too): the caller parks, as on a
// message that cannot be projected.
func (w *Worker) screen(reg *cursor.Registration, rec *projection.Record) (verdict, error) {
	if w.removedFromStream(reg.ID, rec.Seq) {
		return verdict{removed: true}, nil
	}
	if reg.Filter == "" {
		return verdict{deliver: true}, nil
	}
	prg, err := w.filters.program(reg.Filter)
	if err != nil {
		return verdict{}, fmt.Errorf("journal message %d cannot be filtered: %w", rec.Seq, err)
	}
	in, err := w.filterInput(w.target(*reg), rec)
	if err != nil {
		return verdict{}, err
	}
	ok, err := prg.Match(in)
	if err != nil {
		v := verdict{err: fmt.Sprintf("journal message %d: %v", rec.Seq, err)}
		if w.filters.shouldLog(reg.ID, time.Now()) {
			w.log.Warn("filter failed on a message; it is not delivered and the cursor moves past it (logged at most once a minute per registration)",
				"registration", reg.ID, "seq", rec.Seq, "error", err)
		}
		return v, nil
	}
	return verdict{deliver: ok}, nil
}

// filterInput is rec as target's filters read it, built once per record
// and target shape; its data is parsed once per record.
func (w *Worker) filterInput(target projection.Target, rec *projection.Record) (*filter.Input, error) {
	k := cacheKey{
		stream: rec.Stream, seq: rec.Seq, stored: rec.Time.UnixNano(),
		taskID: target.TaskID, format: target.Format, dataContentType: target.DataContentType,
	}
	return getOnce(w.filters.inputs, &w.filters.made, k, func() (*filter.Input, error) {
		d, ok := w.proj.(projection.Describer)
		if !ok {
			return nil, fmt.Errorf("journal message %d cannot be filtered: the %s namespace has no filters", rec.Seq, w.ns)
		}
		ev, err := d.Describe(target, rec)
		if err != nil {
			return nil, err
		}
		rk := recordKey{stream: k.stream, seq: k.seq, stored: k.stored}
		return filter.NewInput(ev, rec, func(raw []byte) ref.Val {
			v, _ := getOnce(w.filters.parsed, &w.filters.made, rk, func() (ref.Val, error) { return parseJSON(raw), nil })
			return v
		}), nil
	})
}

// withScreened moves what s counted into p, whose cursor passes those
// messages, and into the metrics.
func (w *Worker) withScreened(p cursor.Progress, s *screened) cursor.Progress {
	p.Filtered, p.FilterErrors, p.LastFilterError = s.filtered, s.failed, s.lastErr
	w.metrics.screened(w.ns, s.filtered, s.failed)
	*s = screened{}
	return p
}
