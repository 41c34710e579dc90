package cursor

import "time"

// DefaultIdempotencyKeyMaxAge is how long an admin API idempotency key is
// kept when the operator asks nothing else: well past any client's retry
// window, which is counted in seconds.
const DefaultIdempotencyKeyMaxAge = 24 * time.Hour

// RetentionPolicy says what Purge may delete. The store deletes nothing
// unless an operator asks: how long completed work is kept is a question
// with legal answers, and a store that quietly forgot would be a worse
// surprise than one that grows.
type RetentionPolicy struct {
	// CompletedMaxAge: completed registrations whose completion is older
	// than this are eligible, measured by the store's own timestamps.
	CompletedMaxAge time.Duration
	// BatchSize is rows per transaction (default 1,000; zero is treated as
	// one), so a large backlog never holds the write lock for long.
	BatchSize int
	// MaxBatches bounds one call; zero means until nothing is left.
	MaxBatches int
	// IdempotencyKeyMaxAge expires admin API idempotency keys; nil keeps
	// them forever. See EffectiveIdempotencyKeyMaxAge for its floor.
	IdempotencyKeyMaxAge *time.Duration
}

// NewRetentionPolicy keeps completed registrations for completedMaxAge,
// with default batching and the default key age.
func NewRetentionPolicy(completedMaxAge time.Duration) RetentionPolicy {
	age := DefaultIdempotencyKeyMaxAge
	return RetentionPolicy{
		CompletedMaxAge:      completedMaxAge,
		BatchSize:            1000,
		IdempotencyKeyMaxAge: &age,
	}
}

// WithBatchSize sets rows per transaction; zero is treated as one.
func (p RetentionPolicy) WithBatchSize(n int) RetentionPolicy { p.BatchSize = n; return p }

// WithMaxBatches bounds how many batches one Purge runs; zero = no bound.
func (p RetentionPolicy) WithMaxBatches(n int) RetentionPolicy { p.MaxBatches = n; return p }

// WithIdempotencyKeyMaxAge sets the key age; nil keeps keys forever.
func (p RetentionPolicy) WithIdempotencyKeyMaxAge(age *time.Duration) RetentionPolicy {
	p.IdempotencyKeyMaxAge = age
	return p
}

// EffectiveBatchSize is never below one: a zero batch would delete nothing
// forever while reporting progress.
func (p RetentionPolicy) EffectiveBatchSize() int { return max(p.BatchSize, 1) }

// EffectiveIdempotencyKeyMaxAge is the key age Purge uses: never below
// CompletedMaxAge. A key that expired while the registration it created is
// kept would turn a late retry into a second registration instead of a
// replay, so a shorter age is raised rather than obeyed; nil stays nil.
func (p RetentionPolicy) EffectiveIdempotencyKeyMaxAge() *time.Duration {
	if p.IdempotencyKeyMaxAge == nil {
		return nil
	}
	age := max(*p.IdempotencyKeyMaxAge, p.CompletedMaxAge)
	return &age
}

// PurgeReport says what one Purge did. The zero report does not claim
// completeness: Complete is true only when nothing eligible is left.
type PurgeReport struct {
	RegistrationsDeleted   int64 `json:"registrationsDeleted"`
	IdempotencyKeysDeleted int64 `json:"idempotencyKeysDeleted"`
	Batches                int   `json:"batches"`
	Complete               bool  `json:"complete"`
}
