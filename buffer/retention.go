package buffer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// maxDiskSteps bounds the deletions of one disk check; the next check
// goes on where it stopped.
const maxDiskSteps = 32

// RetentionOptions configure a Retention. Zero values are defaults.
type RetentionOptions struct {
	// DiskCheck is how often the data directory's size is measured
	// against the disk cap (default 1s: a walk of a few dozen files), or
	// more often when it grows fast (see nextCheck); the store keeps the
	// measurement for Stats and Status. The clock is checked as often,
	// for RetentionStatus.PausedReason.
	DiskCheck time.Duration
	// PruneEvery is the longest time between two runs of retention by
	// age (default 1h); it runs sooner when the oldest raw reading
	// expires (but not twice within a minute).
	PruneEvery time.Duration
	// Reserve is the free space below which the Headroom pauses ingest
	// (HeadroomOptions.Reserve; DefaultDiskReserve of the store's
	// memtable by default; below 0, none). The disk cap keeps it, and the
	// margin above it at which ingest resumes, free on the file system,
	// whatever else takes space there (effectiveCap).
	Reserve int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives what retention removes. Nil means discard.
	Logger *slog.Logger
}

// Retention runs a Writer's retention policy (RetentionPolicy, which the
// Writer holds and applies): by age (Writer.Prune) when the oldest raw
// reading expires and at least every PruneEvery, and the disk cap
// (RetentionPolicy.MaxDiskBytes) every DiskCheck. The deletes run on the
// Writer's goroutine in steps between group commits; the compaction that
// gives the space back runs on the Retention's. Don't forget to Run it.
type Retention struct {
	store  *Store
	writer *Writer
	opts   RetentionOptions
	log    *slog.Logger

	mu        sync.Mutex // guards the fields below
	lastRun   time.Time
	nextPrune time.Time // when it runs next (schedulePrune)
	paused    string    // why retention by age is paused; empty when it is not
	maxDisk   int64     // the disk cap, as of the last check
	effective int64     // the cap in force at the last check (effectiveCap)
	limitBy   DiskLimit // what set it
	overHigh  bool      // the last check found the directory above the high mark, and said so
	stuck     bool      // and found nothing left to delete, and said so
	full      bool      // the Writer was told to take no batches
	foreign   string    // names of the files not cairn's, as last logged
	sizes     [2]sizeAt // the last two measurements of the directory, oldest first

	compactions int // one goroutine at a time: Run's, or a prune's disk watcher while Run waits (pruneKeepingDiskCap)
}

// NewRetention creates the Retention of w, the Writer of s.
func NewRetention(s *Store, w *Writer, opts RetentionOptions) *Retention {
	if opts.DiskCheck <= 0 {
		opts.DiskCheck = time.Second
	}
	if opts.PruneEvery <= 0 {
		opts.PruneEvery = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Reserve == 0 {
		opts.Reserve = DefaultDiskReserve(s.memTable)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Retention{store: s, writer: w, opts: opts, log: log}
}

// Run applies retention until ctx ends or the Writer stops, and returns
// nil. Failures are logged and tried again at the next check.
func (r *Retention) Run(ctx context.Context) error {
	// The first prune by age waits a minute, as a prune after it does:
	// a gateway that restarts in a loop does not prune at every start.
	r.mu.Lock()
	r.nextPrune = r.opts.Now().Add(minPruneGap)
	r.mu.Unlock()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		now := r.opts.Now()
		r.mu.Lock()
		if r.nextPrune.Sub(now) > r.opts.PruneEvery {
			// The clock was set back (a test clock's offset; the
			// system's steps keep its monotonic reading).
			r.nextPrune = now.Add(minPruneGap)
		}
		due := !now.Before(r.nextPrune)
		r.mu.Unlock()
		var err error
		if due {
			err = r.PruneAge(ctx, now)
		} else {
			err = r.checkClock(ctx, now)
		}
		err = errors.Join(err, r.EnforceDiskCap(ctx))
		switch {
		case ctx.Err() != nil || errors.Is(err, ErrClosed):
			return nil
		case err != nil:
			r.log.Error("retention failed; trying again at the next check", "err", err)
		}
		wait := r.nextCheck()
		r.mu.Lock()
		wait = max(0, min(wait, r.nextPrune.Sub(r.opts.Now())))
		r.mu.Unlock()
		timer.Reset(wait)
	}
}

// minPruneGap is the least time between two prunes by age that the
// expiry of the oldest reading sets off.
const minPruneGap = time.Minute

// schedulePrune sets when retention by age runs next after a run at now:
// when the oldest reading stored expires, at least minPruneGap from now,
// and at most PruneEvery from now (the aggregates' retention is checked
// then).
func (r *Retention) schedulePrune(ctx context.Context, now time.Time) error {
	next := now.Add(r.opts.PruneEvery)
	p, err := r.writer.RetentionPolicy(ctx)
	if err != nil {
		return err
	}
	maxAge, clock := p.RawMaxAge, r.writer.retentionClock()
	if maxAge > 0 {
		oldest, ok, err := r.store.OldestReading()
		if err != nil {
			return err
		}
		if ok {
			expires := time.Unix(0, oldest).Add(maxAge)
			if clock != nil && expires.Before(now) {
				// Kept for a span of readings stamped by an untrusted
				// clock: nothing changes before its keep ends.
				if end, ok := clock.protectionEnds(now, maxAge); ok {
					expires = end
				}
			}
			if soon := now.Add(minPruneGap); expires.Before(soon) {
				expires = soon
			}
			if expires.Before(next) {
				next = expires
			}
		}
	}
	r.mu.Lock()
	r.nextPrune = next
	r.mu.Unlock()
	return nil
}

// minDiskCheck bounds how soon the disk is measured again.
const minDiskCheck = 100 * time.Millisecond

// nextCheck returns when to measure the data directory again: after
// DiskCheck, or sooner when, at the rate it grew since the last check,
// it would reach the high mark before then (at half that time).
func (r *Retention) nextCheck() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	wait := r.opts.DiskCheck
	s0, s1 := r.sizes[0], r.sizes[1]
	if r.effective <= 0 || s0.at.IsZero() || s1.bytes <= s0.bytes {
		return wait
	}
	rate := float64(s1.bytes-s0.bytes) / s1.at.Sub(s0.at).Seconds()
	room := diskHighMark*float64(r.effective) - float64(s1.bytes)
	soon := time.Duration(room / rate / 2 * float64(time.Second))
	return max(min(wait, soon), min(minDiskCheck, wait))
}

// measured records a measurement of the data directory.
func (r *Retention) measured(bytes int64) {
	r.mu.Lock()
	r.sizes[0], r.sizes[1] = r.sizes[1], sizeAt{bytes, time.Now()}
	r.mu.Unlock()
}

// sizeAt is a measurement of the data directory.
type sizeAt struct {
	bytes int64
	at    time.Time
}

// RunOnce applies every policy at now: retention by age, then the disk
// cap. It is the one-step form of Run, for tests and tools.
func (r *Retention) RunOnce(ctx context.Context, now time.Time) error {
	return errors.Join(r.PruneAge(ctx, now), r.EnforceDiskCap(ctx))
}

// PruneAge applies retention by age at now (Writer.Prune). A clock that
// cannot be trusted pauses it: that is recorded for Status, logged once,
// and not an error. Once the prunes since the last compaction have
// removed a tenth of the readings or more, the store is compacted: small
// hourly prunes add up to one compaction, not one each, across restarts
// too (Store.Uncompacted is kept in the store).
func (r *Retention) PruneAge(ctx context.Context, now time.Time) error {
	before, removed := r.store.ReadingCount(), r.writer.prunedCount()
	err := r.pruneKeepingDiskCap(ctx, now)
	removed = r.writer.prunedCount() - removed
	r.mu.Lock()
	r.lastRun = r.opts.Now()
	r.mu.Unlock()
	if r.setPaused(err) {
		r.mu.Lock()
		r.nextPrune = now.Add(minPruneGap) // to resume soon after the clock is set
		r.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("retention by age: %w", err)
	}
	if err := r.schedulePrune(ctx, now); err != nil {
		return err
	}
	if removed > 0 {
		r.log.Info("retention removed old readings", "readings", removed)
	}
	if u := r.store.Uncompacted(); removed > 0 && u*10 >= before {
		r.mu.Lock()
		limit := r.effective
		r.mu.Unlock()
		return r.compact(ctx, limit)
	}
	return nil
}

// pruneKeepingDiskCap runs the Writer's prune at now and, while it runs,
// keeps the disk cap as Run does between prunes: a prune of weeks rests
// while readings come in and can take many minutes, and ingest must not
// take the data directory past the cap meanwhile. The disk cap's steps
// go on the Writer's goroutine between the prune's.
func (r *Retention) pruneKeepingDiskCap(ctx context.Context, now time.Time) error {
	watchCtx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTimer(r.nextCheck())
		defer t.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-t.C:
			}
			if err := r.EnforceDiskCap(watchCtx); err != nil && watchCtx.Err() == nil {
				r.log.Error("disk cap check during a prune failed; trying again at the next check", "err", err)
			}
			t.Reset(r.nextCheck())
		}
	}()
	err := r.writer.Prune(ctx, now)
	stop()
	<-watched
	return err
}

// setPaused records why retention by age is paused, from what Prune or
// the clock check returned, logs when that changes, and reports whether
// it is paused.
func (r *Retention) setPaused(err error) bool {
	reason := ""
	if errors.Is(err, ErrClockBehind) {
		reason = err.Error()
	}
	// The reason ends with what the clock reads; the rest says why.
	why := func(s string) string { w, _, _ := strings.Cut(s, ";"); return w }
	r.mu.Lock()
	was := r.paused
	r.paused = reason
	r.mu.Unlock()
	switch {
	case reason != "" && why(reason) != why(was):
		r.log.Warn("retention by age paused", "reason", reason)
	case reason == "" && was != "":
		r.log.Info("retention by age resumed: the clock is trusted, and readings came within raw_max_age")
	}
	return reason != ""
}

// checkClock updates why retention by age is paused, without pruning.
func (r *Retention) checkClock(ctx context.Context, now time.Time) error {
	why, err := r.writer.ageRetentionPaused(ctx, now)
	if err != nil {
		return err
	}
	r.setPaused(why)
	return nil
}

// compact flushes the memtables (on the Writer's goroutine: it blocks
// writes), compacts the store (Store.compact) and meanwhile, with a disk
// cap, measures the data directory every DiskCheck: at the full mark the
// Writer stops taking batches, which also lets the compaction end (it
// goes on while new tables keep arriving).
func (r *Retention) compact(ctx context.Context, limit int64) error {
	// Tombstones still in a memtable are out of compaction's reach.
	if err := r.writer.flushForCompaction(ctx); err != nil {
		return err
	}
	r.compactions++
	done := make(chan error, 1)
	go func() { done <- r.store.compact() }()
	tick := time.NewTicker(min(r.opts.DiskCheck, 5*minDiskCheck))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if limit <= 0 || ctx.Err() != nil {
				continue
			}
			if size, err := r.diskBytes(); err == nil && atFull(size, limit, false) {
				r.mu.Lock()
				by := r.limitBy
				r.mu.Unlock()
				if err := r.setFull(ctx, size, limit, by); err != nil && ctx.Err() == nil {
					r.log.Error("stopping ingest at the disk cap failed", "err", err)
				}
			}
		}
	}
}

// EnforceDiskCap measures cairn's files in the data directory and, when
// they are above the high mark of the cap in force (effectiveCap: the
// disk cap, or less when the file system has not that much room beside
// the reserve), deletes the oldest data until they are below the low
// mark, in small units, oldest first: raw readings an hour of every
// series at a time, but never the newest KeepRecent of a series (the
// outbox keeps its own copy of unsent ones); then the oldest minute
// records (those rolled up into hours); then the oldest unsent readings
// of the outbox, which are counted (DroppedUnsent); and only when nothing
// else is left, the newest raw readings. The last two go only when the
// disk cap itself binds: never to make room for other files.
// Each step deletes about what must go, judged from the bytes per
// reading, and is logged at warning level; the store is compacted after
// it and measured again. Files in the data directory that are not
// cairn's are not counted and not deleted; they are reported (Status,
// and the log).
func (r *Retention) EnforceDiskCap(ctx context.Context) error {
	p, err := r.writer.RetentionPolicy(ctx)
	if err != nil {
		return err
	}
	size, err := r.diskBytes()
	if err != nil {
		return err
	}
	free, err := FreeBytes(r.store.dir)
	if err != nil {
		return err
	}
	limit, by := effectiveCap(p.MaxDiskBytes, size, free, r.opts.Reserve)
	r.mu.Lock()
	r.maxDisk, r.effective, r.limitBy = p.MaxDiskBytes, limit, by
	logged := r.overHigh
	r.overHigh = overHigh(size, limit)
	if !r.overHigh {
		r.stuck = false
	}
	r.mu.Unlock()
	if !overHigh(size, limit) {
		return r.setFull(ctx, size, limit, by)
	}
	low := int64(diskLowMark * float64(limit))
	if !logged {
		r.log.Warn("data directory above the disk cap's high mark: deleting the oldest data", "disk_bytes", size, "max_disk_bytes", limit, "limit", by, "free_bytes", free)
	}
	if err := r.setFull(ctx, size, limit, by); err != nil {
		return err
	}
	defer func() {
		// The deletes gave space back: the status says what binds now.
		free, err := FreeBytes(r.store.dir)
		r.mu.Lock()
		r.lastRun = r.opts.Now()
		if err == nil {
			r.effective, r.limitBy = effectiveCap(p.MaxDiskBytes, size, free, r.opts.Reserve)
		}
		r.mu.Unlock()
	}()
	tier := tierRaw
	for step, was := 0, size; size > low; step, was = step+1, size {
		if step == maxDiskSteps {
			r.log.Warn("data directory still above the disk cap's low mark; going on at the next check", "disk_bytes", size, "max_disk_bytes", limit, "limit", by)
			return nil
		}
		// Unsent and the newest readings go for the cap alone, never to
		// make room for what else fills the file system.
		deleted, err := r.dropOldest(ctx, &tier, p.KeepRecent, by == LimitCap, size, low, limit)
		if err != nil {
			return err
		}
		if !deleted {
			msg := "data directory above the disk cap's low mark, and nothing left that retention may delete"
			if by != LimitCap {
				msg = "the file system leaves too little beside the reserve, and nothing is left to delete but readings not yet sent and the newest keep_recent of each series: ingest waits below the reserve until space is freed; lower retention.keep_recent or store.disk_reserve, or free space"
			}
			r.nothingLeft(msg, size, limit, by)
			return nil
		}
		if err := r.compact(ctx, limit); err != nil {
			return err
		}
		if size, err = r.diskBytes(); err != nil {
			return err
		}
		if err := r.setFull(ctx, size, limit, by); err != nil {
			return err
		}
		// The newest readings go only while that gives space back: a
		// directory whose files are mostly not readings must not lose
		// them all for nothing.
		if tier == tierRecent && was-size < limit/100 {
			r.nothingLeft("data directory above the disk cap's low mark, and deleting the newest readings gives no space back: raise retention.max_disk_bytes", size, limit, by)
			return nil
		}
	}
	r.mu.Lock()
	r.overHigh, r.stuck = false, false
	r.mu.Unlock()
	r.log.Warn("data directory back under the disk cap's low mark", "disk_bytes", size, "max_disk_bytes", limit, "limit", by)
	return nil
}

// nothingLeft logs msg, that the disk cap can delete nothing more, once
// until the directory is under the high mark again.
func (r *Retention) nothingLeft(msg string, size, limit int64, by DiskLimit) {
	r.mu.Lock()
	logged := r.stuck
	r.stuck = true
	r.mu.Unlock()
	if !logged {
		r.log.Error(msg, "disk_bytes", size, "max_disk_bytes", limit, "limit", by)
	}
}

// DiskLimit names what bounds the data directory's size: the cap in
// force is the disk cap, or what the file system leaves beside the
// reserve when that is less (effectiveCap).
type DiskLimit string

const (
	// LimitNone: no disk cap (retention.max_disk_bytes 0).
	LimitNone DiskLimit = ""
	// LimitCap: the disk cap, as configured or automatic.
	LimitCap DiskLimit = "max_disk_bytes"
	// LimitFree: the file system's free space; what cairn's files take
	// and what is free, less the reserve and its resume margin, is less
	// than the cap.
	LimitFree DiskLimit = "free_space"
	// LimitReserve: less than the reserve is free, so ingest waits
	// (Headroom) until the cap's deletes or something else free space.
	LimitReserve DiskLimit = "reserve"
)

// effectiveCap returns the cap in force for cairn's files, which take
// own bytes, on a file system with free bytes free, and what sets it: the
// disk cap limit, or, when less, own + free less the reserve and its
// resume margin (at least 1 byte), so that the cap always leaves the
// reserve free, whatever else is on the disk, and follows it as it
// changes. Without a cap (limit 0) there is none; with a reserve below 0
// it is the disk cap.
func effectiveCap(limit, own, free, reserve int64) (int64, DiskLimit) {
	if limit <= 0 {
		return 0, LimitNone
	}
	if reserve < 0 {
		return limit, LimitCap
	}
	room := max(own+free-reserve-resumeMargin(reserve), 1)
	switch {
	case free < reserve:
		return min(room, limit), LimitReserve
	case room < limit:
		return room, LimitFree
	}
	return limit, LimitCap
}

// setFull has the Writer stop taking batches while size is at the full
// mark of limit, or take them again below the high mark, and logs the
// change. Only the disk cap itself pauses (by LimitCap); for the free
// space the Headroom does.
func (r *Retention) setFull(ctx context.Context, size, limit int64, by DiskLimit) error {
	r.mu.Lock()
	was := r.full
	// Only the cap itself has ingest wait at its full mark: what the file
	// system leaves beside the reserve is kept by deleting, and the
	// Headroom has ingest wait below the reserve. A full mark of that
	// would stop ingest for good when what is left is the newest
	// keep_recent, which only new readings let go.
	full := by == LimitCap && atFull(size, limit, was)
	r.full = full
	r.mu.Unlock()
	if full == was {
		return nil
	}
	reason := ""
	if full {
		reason = fmt.Sprintf("the data directory is at the disk cap (%s of %s)", formatBytes(size), formatBytes(limit))
		r.log.Warn("data directory at the disk cap: ingest waits until retention has made room", "disk_bytes", size, "max_disk_bytes", limit, "limit", by)
	} else {
		r.log.Info("ingest resumes: the data directory is under the disk cap's high mark", "disk_bytes", size, "max_disk_bytes", limit, "limit", by)
	}
	return r.writer.setPause(ctx, PauseDiskCap, reason)
}

// The kinds of data the disk cap deletes, in order.
const (
	tierRaw = iota
	tierMinutes
	tierOutbox
	tierRecent
)

// dropOldest deletes the oldest data of the kind *tier names or, when it
// has none left, of the next kind, and reports whether it deleted
// anything. A kind, once done, is not gone back to within a pass: new
// readings keep arriving, and the raw readings of the newest hour must
// not keep the outbox from ever being reached. Unsent readings
// (tierOutbox) and the newest raw ones (tierRecent) go only when the
// disk cap itself binds (capBinds).
func (r *Retention) dropOldest(ctx context.Context, tier *int, keepRecent time.Duration, capBinds bool, size, low, limit int64) (bool, error) {
	// The readings to delete: the share of the directory that must go.
	readings := r.store.ReadingCount()
	want := max(1, uint64(float64(readings)*float64(size-low)/float64(max(size, 1))))
	// Readings kept for an upstream no longer configured go first: no one
	// is to get them.
	if n, err := r.store.DropOrphaned(); err != nil || n > 0 {
		return n > 0, err
	}
	if *tier == tierRaw {
		n, from, to, done, err := r.writer.DropOldestRaw(ctx, keepRecent, want)
		if err != nil {
			return false, err
		}
		if done {
			*tier = tierMinutes
		}
		if n > 0 {
			r.log.Warn("disk cap: deleted the oldest raw readings", "readings", n,
				"from", time.Unix(0, from).UTC(), "to", time.Unix(0, to).UTC(), "keep_recent", keepRecent,
				"disk_bytes", size, "max_disk_bytes", limit)
			return true, nil
		}
	}
	if *tier == tierMinutes {
		n, err := r.writer.DropOldestMinutes(ctx)
		if err != nil {
			return false, err
		}
		if n > 0 {
			r.log.Warn("disk cap: deleted the oldest day of minute records (hours and days stay)", "records", n,
				"disk_bytes", size, "max_disk_bytes", limit)
			return true, nil
		}
		*tier = tierOutbox
	}
	if !capBinds {
		return false, nil
	}
	if *tier == tierOutbox {
		if pending := r.store.LogPending(); pending > 0 {
			// Only entries the checkpoint has passed may go (their
			// readings are in runs): checkpoint, so that the newest may.
			if err := r.writer.do(ctx, r.writer.checkpoint); err != nil {
				return false, err
			}
			// The share of the outbox to go is the share of the directory
			// that must go; at least one entry.
			d, err := r.store.DropOutbox(max(1, uint64(float64(pending)*float64(size-low)/float64(size))))
			if err != nil {
				return false, err
			}
			if d.Readings() > 0 {
				r.log.Warn("disk cap: dropped readings that were never sent upstream", "readings", d.Readings(),
					"first_seq", d.From, "oldest", time.Unix(0, d.OldestTS).UTC(), "newest", time.Unix(0, d.NewestTS).UTC(),
					"dropped_unsent", r.store.DroppedUnsent(), "disk_bytes", size, "max_disk_bytes", limit)
				return true, nil
			}
		}
		*tier = tierRecent
	}
	if keepRecent <= 0 {
		return false, nil
	}
	n, from, to, _, err := r.writer.DropOldestRaw(ctx, -1, want)
	if err != nil || n == 0 {
		return false, err
	}
	r.log.Warn("disk cap: nothing older is left; deleted the oldest of the newest raw readings", "readings", n,
		"from", time.Unix(0, from).UTC(), "to", time.Unix(0, to).UTC(), "keep_recent", keepRecent,
		"disk_bytes", size, "max_disk_bytes", limit)
	return true, nil
}

// diskBytes measures cairn's files in the data directory, and logs the
// files there that are not cairn's when they change. The store keeps the
// measurement for Stats and Status.
func (r *Retention) diskBytes() (int64, error) {
	st, err := r.store.measureDisk()
	if err != nil {
		return 0, err
	}
	r.measured(st.DiskBytes)
	foreign := strings.Join(st.ForeignFiles, "\x00")
	r.mu.Lock()
	changed := foreign != r.foreign
	r.foreign = foreign
	r.mu.Unlock()
	if changed && foreign != "" {
		r.log.Warn("files in the data directory that are not cairn's: the disk cap neither counts nor deletes them, but they take space on its file system",
			"files", st.ForeignFiles, "bytes", st.ForeignBytes)
	}
	return st.DiskBytes, nil
}

// RetentionStatus says what retention did and why it may be waiting.
type RetentionStatus struct {
	// LastRun is when retention last ran (by age, or the disk cap above
	// its high mark); nil before the first run.
	LastRun *time.Time `json:"last_run"`
	// NextRun is when retention by age runs next, by the gateway's
	// clock; nil before Run starts.
	NextRun *time.Time `json:"next_run"`
	// RemovedReadings counts the raw readings retention deleted since
	// start, by age or for the disk cap.
	RemovedReadings uint64 `json:"removed_readings"`
	// DroppedUnsent counts the readings the disk cap dropped before they
	// were sent upstream, for the life of the data directory.
	DroppedUnsent uint64 `json:"dropped_unsent"`
	// PausedReason says why retention by age is paused; empty when it is
	// not.
	PausedReason string `json:"paused_reason"`
	// OldestReading and NewestReading bound what is stored; nil when
	// nothing is.
	OldestReading *time.Time `json:"oldest_reading"`
	NewestReading *time.Time `json:"newest_reading"`
	// DiskBytes is what cairn's files in the data directory take, as
	// measured at DiskMeasuredAt (every DiskCheck while Retention runs;
	// see Store.Stats); MaxDiskBytes the cap (0: none).
	DiskBytes      int64      `json:"disk_bytes"`
	DiskMeasuredAt *time.Time `json:"disk_measured_at"`
	MaxDiskBytes   int64      `json:"max_disk_bytes"`
	// EffectiveMaxDiskBytes is the cap in force at the last check: the
	// disk cap, or what the file system leaves beside the reserve when
	// that is less; DiskLimit says which (LimitCap, LimitFree or
	// LimitReserve; "" without a cap). 0 before the first check.
	EffectiveMaxDiskBytes int64     `json:"effective_max_disk_bytes"`
	DiskLimit             DiskLimit `json:"disk_limit"`
}

// Status returns what retention did. The size of the data directory is
// the store's last measurement (Store.Stats), not a walk of its own; the
// oldest reading is the store's (OldestReading), sought again only after a
// prune removed readings, so a status polled often neither walks the
// directory nor has the Writer checkpoint at each call.
func (r *Retention) Status() (RetentionStatus, error) {
	r.mu.Lock()
	st := RetentionStatus{PausedReason: r.paused, MaxDiskBytes: r.maxDisk, EffectiveMaxDiskBytes: r.effective, DiskLimit: r.limitBy}
	if !r.lastRun.IsZero() {
		t := r.lastRun.UTC()
		st.LastRun = &t
	}
	if !r.nextPrune.IsZero() {
		t := r.nextPrune.UTC()
		st.NextRun = &t
	}
	r.mu.Unlock()
	st.RemovedReadings = r.writer.prunedCount()
	st.DroppedUnsent = r.store.DroppedUnsent()
	ss, err := r.store.Stats()
	if err != nil {
		return st, err
	}
	st.DiskBytes = ss.DiskBytes
	if !ss.MeasuredAt.IsZero() {
		t := ss.MeasuredAt.UTC()
		st.DiskMeasuredAt = &t
	}
	oldest, ok, err := r.store.OldestReading()
	if err != nil {
		return st, err
	}
	if ok {
		o, n := time.Unix(0, oldest).UTC(), time.Unix(0, r.store.newestReading()).UTC()
		st.OldestReading, st.NewestReading = &o, &n
	}
	return st, nil
}
