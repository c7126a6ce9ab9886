package buffer

import (
	"context"
	"maps"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// RetentionPolicy is what the Writer keeps: the rules by age, which go by
// the wall clock and pause while it cannot be trusted; the rules by
// recency, which go by each series' own newest reading whatever the
// clock says; and the disk cap. The zero value keeps everything, for
// ever. The Writer holds the policy in force (WriterOptions.Retention,
// SetRetentionPolicy) and applies it in its steps (Prune, DropOldestRaw,
// DropOldestMinutes); a Retention decides when.
type RetentionPolicy struct {
	// RawMaxAge is how long raw readings are kept, by wall clock: those
	// of a UTC day go once the whole day is older (0: for ever).
	RawMaxAge time.Duration
	// StatsMaxAge is how long the minute, hour and day aggregate records
	// are kept, by wall clock, indexed by level (0: for ever).
	StatsMaxAge map[aggregate.Level]time.Duration
	// RawMaxReadingsPerSeries keeps only the newest readings of each
	// series, this many (0: no limit), whatever the clock says.
	RawMaxReadingsPerSeries int
	// RawWindowFromLatest keeps only the readings within this long of
	// the newest reading of their series (0: no limit), for devices whose
	// clock is wrong but consistent; whatever the clock says.
	RawWindowFromLatest time.Duration

	// MaxDiskBytes caps the data directory's size (0: no cap); a
	// Retention keeps it (see the watermarks below).
	MaxDiskBytes int64
	// KeepRecent is how much of each series' newest readings the disk cap
	// keeps while anything older is left to delete (0: none).
	KeepRecent time.Duration
}

// prunes reports whether a rule by age or by recency deletes anything.
func (p RetentionPolicy) prunes() bool {
	return p.RawMaxAge > 0 || len(p.StatsMaxAge) > 0 || p.RawMaxReadingsPerSeries > 0 || p.RawWindowFromLatest > 0
}

// clone returns p with a StatsMaxAge of its own.
func (p RetentionPolicy) clone() RetentionPolicy {
	p.StatsMaxAge = maps.Clone(p.StatsMaxAge)
	return p
}

// Watermarks of the disk cap (RetentionPolicy.MaxDiskBytes): above the
// high one, the oldest data is deleted until the data directory is below
// the low one. The gap keeps a store that grows slowly from deleting a
// little at every check, and leaves room for what arrives between two
// checks and for compaction, which writes new tables before it removes
// the old.
//
// At the full mark, the Writer takes no new batches until the directory
// is below the high mark again: readings wait in its queue (and at the
// sensors or the broker, unacknowledged) rather than pass the cap when
// they arrive faster than retention deletes.
const (
	diskFullMark = 0.97
	diskHighMark = 0.90
	diskLowMark  = 0.75
)

// overHigh reports whether size is above the high mark of the cap limit
// (never, without a cap).
func overHigh(size, limit int64) bool {
	return limit > 0 && float64(size) > diskHighMark*float64(limit)
}

// atFull reports whether size is at the full mark of the cap limit, and
// so whether the Writer should take no batches: from the full mark
// until the directory is back under the high mark (was: it took none).
func atFull(size, limit int64, was bool) bool {
	return limit > 0 && float64(size) >= diskFullMark*float64(limit) || was && overHigh(size, limit)
}

// SetRetentionPolicy has the running Writer apply p from now on. Prune
// and the disk cap's steps read the policy in force at each step, so a
// prune under way goes on with the new one; a Retention applies it at
// its next run.
func (w *Writer) SetRetentionPolicy(ctx context.Context, p RetentionPolicy) error {
	p = p.clone()
	return w.do(ctx, func() error {
		w.policy = p
		return nil
	})
}

// RetentionPolicy returns the policy in force, from the running Writer.
func (w *Writer) RetentionPolicy(ctx context.Context) (RetentionPolicy, error) {
	var p RetentionPolicy
	err := w.do(ctx, func() error {
		p = w.policy.clone()
		return nil
	})
	if err != nil {
		// do may return (ctx ended) before the step has run: p is the
		// step's until then.
		return RetentionPolicy{}, err
	}
	return p, nil
}

// retentionClock returns the clock that says whether retention by age may
// run (WriterOptions.Clock; nil: trusted). It never changes.
func (w *Writer) retentionClock() *Clock { return w.opts.Clock }

// ageRetentionPaused has the running Writer say why retention by age
// would not run at now (an ErrClockBehind error; nil: it would run),
// without pruning. err is the step's own failure.
func (w *Writer) ageRetentionPaused(ctx context.Context, now time.Time) (why, err error) {
	var paused error
	err = w.do(ctx, func() error {
		paused = w.checkClock(now)
		return nil
	})
	if err != nil {
		// do may return (ctx ended) before the step has run: paused is
		// the step's until then.
		return nil, err
	}
	return paused, nil
}

// flushForCompaction has the running Writer flush Badger's memtables, so
// that the compaction that follows sees their tombstones: the flush
// blocks writes, so it must come between group commits.
func (w *Writer) flushForCompaction(ctx context.Context) error {
	return w.do(ctx, w.store.flushMemtables)
}

// prunedCount returns how many raw readings retention deleted since the
// Writer was created.
func (w *Writer) prunedCount() uint64 { return w.prunedReadings.Load() }
