package buffer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// ErrClosed is returned by Writer.Submit once the Writer has begun to stop.
var ErrClosed = errors.New("writer closed")

// Result is what the Writer reports for one submitted batch of readings.
type Result struct {
	Stored     int // readings new to the store
	Duplicates int // readings that were stored already, or repeated in the commit
	// Refused counts the readings not stored because each would have made
	// a new series over a limit (WriterOptions.MaxSeries and
	// MaxSeriesPerDevice); Refusal describes the first of them (nil: none).
	// The batch's other readings are stored.
	Refused int
	Refusal *SeriesRefusal
	Err     error // nil when every reading of the batch is on disk (or refused)
}

// WriterOptions configure a Writer. Zero values are defaults.
type WriterOptions struct {
	// MaxReadings caps the readings of one group commit (default 10,000).
	MaxReadings int
	// Interval is the least time from the start of one group commit to the
	// start of the next (default 0: commit as soon as the queue is empty).
	// Readings that arrive in between join the next commit, so that a
	// light, steady stream costs a few commits a second, not one per
	// message; under load a commit takes longer than this anyway.
	Interval time.Duration
	// Linger is how long a commit, once Interval has passed, still waits
	// for the next batch while batches keep coming less than Linger apart,
	// up to lingerIntervals × Interval from the start of the last commit
	// (default 0: it does not wait; nor with an Interval of 0). A burst (a
	// bridge with many messages in flight) is committed once it pauses for
	// Linger; a steady stream is gathered into fewer, larger commits, each
	// costing a sync.
	Linger time.Duration
	// Wait is how long the first reading of a small group commit, one of
	// fewer than WaitReadings readings, may wait for more before the
	// commit starts (default 0: it does not wait). A light stream is then
	// written in a few commits a second, not one per message: every
	// commit syncs at least a page of Badger's log, and an SD card wears
	// by the pages written. A commit of WaitReadings or more starts as
	// Interval and Linger say.
	Wait time.Duration
	// WaitReadings is how many readings make a commit large enough not
	// to wait (see Wait). The commit after one that gathered as many in
	// less than half of Wait does not wait either: readings are coming
	// fast (the rest of a burst, a publisher's next window).
	WaitReadings int
	// QueueSize is how many submitted batches may wait (default 4,096).
	// Submit blocks when the queue is full.
	QueueSize int
	// BucketSamples is the most readings a sealed bucket holds (default
	// 200, at most MaxBucketSamples).
	BucketSamples int
	// SealIdle is how long a series must get no new reading before its
	// open points are sealed into a bucket that is not full (default 1h).
	SealIdle time.Duration
	// SealCheck is how often the Writer looks for open points that are due
	// to be sealed (default 1 minute).
	SealCheck time.Duration
	// RawMaxAge is how long raw readings are kept, by wall clock: those of
	// a UTC day go once the whole day is older (0: for ever). Applied by
	// Prune, which a Retention calls.
	RawMaxAge time.Duration
	// StatsMaxAge is how long the minute, hour and day aggregate records
	// are kept, by wall clock, indexed by level (0: for ever). Applied by
	// Prune.
	StatsMaxAge map[aggregate.Level]time.Duration
	// RawMaxReadingsPerSeries keeps only the newest readings of each
	// series, this many (0: no limit). Applied by Prune, whatever the
	// clock says.
	RawMaxReadingsPerSeries int
	// RawWindowFromLatest keeps only the readings within this long of
	// the newest reading of their series (0: no limit), for devices whose
	// clock is wrong but consistent. Applied by Prune, whatever the clock
	// says.
	RawWindowFromLatest time.Duration
	// Clock says whether the clock that Prune is given can be trusted
	// (clock.go): retention by age pauses while it cannot, and keeps the
	// spans of readings it stamped. Nil: the clock is trusted.
	Clock *Clock
	// MaxDiskBytes caps the data directory's size (0: no cap); a
	// Retention keeps it (retention.go).
	MaxDiskBytes int64
	// KeepRecent is how much of each series' newest readings the disk cap
	// keeps while anything older is left to delete (0: none).
	KeepRecent time.Duration

	// MaxSeries caps the series of the store, and MaxSeriesPerDevice
	// those of one device (0: no limit). A reading that would make a new
	// series over either is refused (Result.Refused, series.go).
	MaxSeries          int
	MaxSeriesPerDevice int

	// Outbox has every group commit also append the readings it stores to
	// the outbox, for the uplink (see outbox.go).
	Outbox bool

	// CheckpointInterval is the longest the readings of a group commit stay
	// in the journal before a checkpoint writes them as runs and
	// aggregates (default 60 s; see journal.go). Queries, sealing, rolling
	// up and pruning checkpoint first.
	CheckpointInterval time.Duration

	noSeal bool // keep every reading as a point of its own, unsealed (for benchmarks)
	// sealAfter is sealAfterCommits, longer in tests whose writes must not
	// depend on how fast they run.
	sealAfter time.Duration
}

// MaxBucketSamples is the largest WriterOptions.BucketSamples.
const MaxBucketSamples = 10000

// WriterStats are the Writer's counters since it was created.
type WriterStats struct {
	Commits        uint64 // group commits synced
	Stored         uint64 // readings stored
	Duplicates     uint64 // readings that were already stored
	Failures       uint64 // group commits that failed
	SyncNanos      uint64 // time spent in commits and syncs
	Sealed         uint64 // readings sealed into buckets
	SealErrors     uint64 // sealing transactions that failed
	Pruned         uint64 // aggregate records deleted by retention
	PrunedReadings uint64 // raw readings deleted by retention
	Checkpoints    uint64 // checkpoints of the journal committed
	Refused        uint64 // readings refused for making a series over a limit
}

// Writer is the single writer of a Store: it takes batches of readings from
// any number of goroutines, writes them in group commits (one transaction
// and one sync for everything that is queued), and then reports each batch's
// result in the order the batches were submitted.
type Writer struct {
	store *Store
	opts  WriterOptions
	queue chan request
	// steps carries one-step calls (SealDue, RollUp, Prune) to the Run
	// goroutine.
	steps chan stepRequest

	stopping  chan struct{} // closed when Run begins to stop
	stopped   chan struct{} // closed when Run has stopped
	closeOnce sync.Once
	mu        sync.RWMutex // guards closed; held for reading by Submit while it sends
	closed    bool

	commits, stored, duplicates, failures, syncNanos atomic.Uint64
	sealed, sealErrors, pruned, prunedReadings       atomic.Uint64
	checkpoints, refused                             atomic.Uint64
	pausedWhy                                        atomic.Pointer[string] // PausedReason; nil when taking batches
	pruneBusy                                        atomic.Int64           // nanoseconds of prune steps

	// Used by the Run goroutine only.
	lastStart time.Time              // when the last commit began
	busy      bool                   // the last commit gathered WaitReadings in less than Wait/2
	runMax    int                    // the most readings of a run (see open.go)
	pauses    [numPauseCauses]string // why no new batches are taken, by cause ("" for none; pause.go)
	batch     []request
	results   []Result
	scratch   []byte
	snap      *badger.Txn                            // read snapshot of the commit, if one was needed
	created   map[string]*seriesState                // series new in this commit
	createdBy map[string]*deviceSeries               // how many of them each device has
	deltas    map[statKey]aggregate.Stats            // aggregates of the commit part under way
	written   []writtenStats                         // records written by the commit part under way
	touched   []*seriesState                         // series written in this commit; after a checkpoint, those it wrote
	units     map[*seriesState]unique.Handle[string] // units the commit part under way changes (unit.go)
	outbox    encoding.OutboxEncoder                 // outbox entry of the commit part under way
	seal      sealer

	// The journal (journal.go); used by the Run goroutine only.
	jour      encoding.OutboxEncoder      // journal entry of the commit part under way
	jseq      uint64                      // the key of the next journal entry
	jkeys     [][]byte                    // the entries committed since the last checkpoint
	ckpt      txnBudget                   // what the next checkpoint may still take
	ckDeltas  map[statKey]aggregate.Stats // aggregates of the readings in the journal
	dirty     []*seriesState              // series with readings in the journal
	ckptDue   *time.Timer                 // runs while the journal holds readings
	ckptArmed bool                        // ckptDue runs
	flushed   []*seriesState              // series checkpointed, not yet sealed and rolled up
	lastSeal  time.Time                   // when sealFlushed last ran
	replaying bool                        // the Writer of replayJournal: its series are not left to seal
}

type request struct {
	readings []Reading
	done     func(Result)
}

// NewWriter creates the Writer of s. Don't forget to Run it.
func NewWriter(s *Store, opts WriterOptions) *Writer {
	if opts.MaxReadings <= 0 {
		opts.MaxReadings = 10000
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.BucketSamples <= 0 {
		opts.BucketSamples = 200
	}
	opts.BucketSamples = min(opts.BucketSamples, MaxBucketSamples)
	if opts.SealIdle <= 0 {
		opts.SealIdle = time.Hour
	}
	if opts.SealCheck <= 0 {
		opts.SealCheck = time.Minute
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = defaultCheckpointInterval
	}
	runMax := s.runMax()
	if opts.noSeal {
		runMax = 1
	}
	if opts.sealAfter <= 0 {
		opts.sealAfter = sealAfterCommits
	}
	return &Writer{
		store:     s,
		opts:      opts,
		runMax:    runMax,
		queue:     make(chan request, opts.QueueSize),
		steps:     make(chan stepRequest),
		stopping:  make(chan struct{}),
		stopped:   make(chan struct{}),
		created:   make(map[string]*seriesState),
		createdBy: make(map[string]*deviceSeries),
		units:     make(map[*seriesState]unique.Handle[string]),
		deltas:    make(map[statKey]aggregate.Stats),
		ckDeltas:  make(map[statKey]aggregate.Stats),
		ckpt:      newTxnBudget(s.db, 0),
		jseq:      s.journalNext(),
	}
}

// Submit queues readings for the next group commit. done is called exactly
// once, from the Writer's goroutine, after the commit holding the readings
// was synced (or failed); calls to done follow the order of Submit calls.
// done must return quickly: it holds up every later result. A batch without
// readings is allowed: its done is called in order like any other.
//
// Submit blocks while the queue is full. It returns ErrClosed, and never
// calls done, once the Writer is stopping, or ctx.Err() if ctx ends first.
// A reading whose device id or metric name is not valid (encoding.CheckDevice,
// encoding.CheckMetric) fails the whole batch at once, with an error naming it.
func (w *Writer) Submit(ctx context.Context, readings []Reading, done func(Result)) error {
	if err := checkNames(readings); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case w.queue <- request{readings: readings, done: done}:
		return nil
	case <-w.stopping:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run writes group commits until ctx ends, then commits everything that was
// submitted before it stopped accepting, and returns nil.
func (w *Writer) Run(ctx context.Context) error {
	tick := time.NewTicker(w.opts.SealCheck)
	defer tick.Stop()
	w.ckptDue = time.NewTimer(w.opts.CheckpointInterval)
	w.ckptDue.Stop()
	defer w.ckptDue.Stop()
	w.store.setFlusher(w.flush)
	defer w.store.setFlusher(nil)
	defer close(w.stopped)
	for {
		queue := w.queue
		if w.paused() {
			queue = nil // batches wait in the queue, and Submit blocks once it is full
		}
		select {
		case req := <-queue:
			w.batch = append(w.batch[:0], req)
			w.collect(ctx)
			w.commit()
		case <-w.ckptDue.C:
			w.ckptArmed = false
			w.checkpointNow()
		case now := <-tick.C:
			if w.opts.Clock != nil {
				now = w.opts.Clock.Now()
			}
			if w.checkpointNow() == nil {
				w.queueDue(now)
				w.sealNow()
				if err := w.rollUp(now, nil); err != nil {
					w.store.log.Error("rolling up aggregates failed; minute records answer meanwhile", "err", err)
				}
			}
		case req := <-w.steps:
			if req.checkpoint {
				if err := w.checkpointNow(); err != nil {
					req.done <- err
					continue
				}
			}
			req.done <- req.step()
		case <-ctx.Done():
			w.stop()
			return nil
		}
	}
}

// stop refuses new batches and commits the queued ones.
func (w *Writer) stop() {
	w.closeOnce.Do(func() { close(w.stopping) })
	w.mu.Lock() // waits for Submit calls that are sending
	w.closed = true
	w.mu.Unlock()
	for {
		w.batch = w.batch[:0]
		n := 0
	drain:
		for n < w.opts.MaxReadings {
			select {
			case req := <-w.queue:
				w.batch = append(w.batch, req)
				n += len(req.readings)
			default:
				break drain
			}
		}
		if len(w.batch) == 0 {
			w.checkpointNow()
			return
		}
		w.commit()
	}
}

// collect adds queued requests to w.batch until it holds MaxReadings,
// or the queue is empty and Interval has passed since the last commit
// began (and, while it holds fewer than WaitReadings readings, Wait since
// its first request came, unless the last commit was busy) and, with
// Linger, no request came for Linger
// (or lingerIntervals × Interval have passed), or ctx ends.
func (w *Writer) collect(ctx context.Context) {
	n := len(w.batch[0].readings)
	last := time.Now() // when the newest request came
	first := last      // when the first came
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		w.busy = n >= w.opts.WaitReadings && last.Sub(first) < w.opts.Wait/2
	}()
	wait := !w.busy // a commit after a busy one does not wait
	for n < w.opts.MaxReadings {
		select {
		case req := <-w.queue:
			w.batch = append(w.batch, req)
			n += len(req.readings)
			if w.opts.Linger > 0 {
				last = time.Now()
			}
			continue
		default:
		}
		now := time.Now()
		until := w.lastStart.Add(w.opts.Interval)
		if t := first.Add(w.opts.Wait); wait && n < w.opts.WaitReadings && t.After(until) {
			until = t
		}
		if !now.Before(until) {
			if w.opts.Linger <= 0 || now.Sub(last) >= w.opts.Linger {
				return
			}
			limit := w.lastStart.Add(lingerIntervals * w.opts.Interval)
			if !now.Before(limit) {
				return
			}
			until = last.Add(w.opts.Linger)
			if limit.Before(until) {
				until = limit
			}
		}
		if timer == nil {
			timer = time.NewTimer(until.Sub(now))
		} else {
			timer.Reset(until.Sub(now))
		}
		select {
		case req := <-w.queue:
			w.batch = append(w.batch, req)
			n += len(req.readings)
			last = time.Now()
		case <-timer.C:
		case <-ctx.Done():
			return
		}
	}
}

// lingerIntervals bounds how long Linger may hold a commit: this many
// Intervals from the start of the last one.
const lingerIntervals = 5

// commit writes w.batch in one transaction, syncs, and reports results.
func (w *Writer) commit() {
	start := time.Now()
	w.lastStart = start
	w.results = w.results[:0]
	for range w.batch {
		w.results = append(w.results, Result{})
	}
	err := w.write()
	w.syncNanos.Add(uint64(time.Since(start)))
	if err != nil {
		w.failures.Add(1)
		err = fmt.Errorf("group commit: %w", err)
		w.store.log.Error("group commit failed: its messages are not acknowledged", "batches", len(w.batch), "err", err)
	} else {
		w.commits.Add(1)
	}
	for i, req := range w.batch {
		res := w.results[i]
		if err != nil {
			res = Result{Err: err}
		} else {
			w.stored.Add(uint64(res.Stored))
			w.duplicates.Add(uint64(res.Duplicates))
			w.refused.Add(uint64(res.Refused))
		}
		req.done(res)
		w.batch[i] = request{} // let the readings go
	}
	if time.Since(w.lastSeal) >= w.opts.sealAfter {
		w.sealFlushed()
	}
	if len(w.jkeys) > 0 && !w.ckptArmed && w.ckptDue != nil {
		w.ckptDue.Reset(w.opts.CheckpointInterval)
		w.ckptArmed = true
	}
}

// sealNow seals what is queued, logging a failure: the points stay open
// and durable, and sealing is tried again later.
func (w *Writer) sealNow() {
	if len(w.seal.queue) == 0 {
		return
	}
	if err := w.sealQueued(); err != nil {
		w.sealErrors.Add(1)
		w.store.log.Error("sealing failed; the readings stay stored as points", "err", err)
	}
}

// SealDue has the running Writer seal every series-day that is due at now,
// as its periodic check does, and returns the result. It is the one-step
// form of that check, for tests and tools.
func (w *Writer) SealDue(ctx context.Context, now time.Time) error {
	return w.doCheckpointed(ctx, func() error {
		w.queueDue(now)
		return w.sealQueued()
	})
}

// do runs step on the Run goroutine and returns its result.
func (w *Writer) do(ctx context.Context, step func() error) error {
	return w.doStep(ctx, stepRequest{step: step, done: make(chan error, 1)})
}

// doCheckpointed is do for a step that reads or changes what is stored:
// the journal is checkpointed first (and what that wrote sealed and
// rolled up), so that the step finds every reading in runs and records.
func (w *Writer) doCheckpointed(ctx context.Context, step func() error) error {
	return w.doStep(ctx, stepRequest{step: step, done: make(chan error, 1), checkpoint: true})
}

func (w *Writer) doStep(ctx context.Context, req stepRequest) error {
	select {
	case w.steps <- req:
	case <-w.stopping:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type stepRequest struct {
	step       func() error
	done       chan error
	checkpoint bool // checkpoint first
}

// write stores the readings of w.batch that are not stored yet, syncs, and
// then updates the store's index. A reading newer than the newest of its
// series cannot be stored already; only older ones cost a lookup. The
// readings go to the journal (journal.go): a part of the commit ends, and
// the journal is checkpointed, when the next reading would not fit the
// part's transaction or the checkpoint's.
func (w *Writer) write() error {
	now := time.Now()
	clear(w.created)
	clear(w.createdBy)
	w.touched = w.touched[:0]
	defer func() {
		clear(w.deltas) // what a failed part had gathered
		clear(w.units)
		for _, st := range w.touched {
			st.touched = false
			st.pend = st.pend[:0] // committed ones were moved to the journal's
		}
		if w.snap != nil {
			w.snap.Discard()
			w.snap = nil
		}
	}()
	var added uint64
	w.outbox.Reset()
	w.jour.Reset()
	txn, budget, err := w.newPart()
	if err != nil {
		return err
	}
	defer func() {
		if txn != nil {
			txn.Discard()
		}
	}()
	for i, req := range w.batch {
		for _, r := range req.readings {
			st, limit, n := w.state(r.Device, r.Metric, now)
			if st == nil {
				w.refuse(&w.results[i], &r, limit, n)
				continue
			}
			smp := Sample{TS: r.TS, Value: r.Value}
			if r.TS <= st.next {
				dup, err := w.isStored(st, smp)
				if err != nil {
					return err
				}
				if dup {
					w.results[i].Duplicates++
					continue
				}
			}
			unit, newUnit := w.unitChange(st, r.Unit)
			var unitSize int64
			if newUnit {
				unitSize = unitEntrySize(st, unit)
			}
			if !w.reserve(&budget, st, &r, unitSize) {
				// Readings are idempotent: commit this part, with the
				// count of what it holds, checkpoint, and go on. Sync it
				// now: db.Sync covers only the memtable being written,
				// and the next part may start a new one.
				if err := w.commitAndSync(txn, added); err != nil {
					return err
				}
				if err := w.checkpoint(); err != nil {
					return err
				}
				added = 0
				txn.Discard()
				if txn, budget, err = w.newPart(); err != nil {
					return err
				}
				w.reserve(&budget, st, &r, unitSize) // an empty part and checkpoint take a reading
			}
			if newUnit {
				if err := w.setUnit(txn, st, unit); err != nil {
					return err
				}
			}
			w.hold(st, smp)
			w.jour.Add(&r)
			if w.opts.Outbox {
				w.outbox.Add(&r)
			}
			st.lastWrite = now.UnixNano()
			w.results[i].Stored++
			added++
		}
	}
	return w.commitAndSync(txn, added)
}

// hold adds a new sample of st to the part under way: to its aggregates,
// and to the series' pending points.
func (w *Writer) hold(st *seriesState, smp Sample) {
	w.addStats(st, smp.TS, smp.Value)
	if !st.touched {
		st.touched = true
		w.touched = append(w.touched, st)
	}
	st.next = max(st.next, smp.TS)
	st.pend = append(st.pend, smp)
}

// reserve reports whether r of st fits the part under way (its journal and
// outbox entries, and the entry of its series' unit, of unitSize bytes,
// when it changes it) and the next checkpoint (its run and its records),
// and counts it in both if so.
func (w *Writer) reserve(part *txnBudget, st *seriesState, r *Reading, unitSize int64) bool {
	try := *part
	if unitSize > 0 && !try.takeSize(unitSize) {
		return false
	}
	if !w.reserveJournal(&try, r) || !w.reserveOutbox(&try, r) || !w.reserveReading(&w.ckpt, st, r.TS) {
		return false
	}
	*part = try
	return true
}

// reserveReading reports whether a reading at ts of st fits the checkpoint
// budget b (its run and its records), and counts it if so.
func (w *Writer) reserveReading(b *txnBudget, st *seriesState, ts int64) bool {
	try, day, run := *b, st.pendDay, st.pendRun
	if !w.reserveRun(&try, st, ts) || !w.reserveStats(&try, st, ts) {
		st.pendDay, st.pendRun = day, run
		return false
	}
	*b = try
	return true
}

// reserveRun reports whether a reading at ts of st fits the runs of the
// next checkpoint, and counts it if so. A reading of another day than the
// series' last one in the journal, or one past runMax, starts a run: its
// key and header count too.
func (w *Writer) reserveRun(b *txnBudget, st *seriesState, ts int64) bool {
	day := encoding.DayOf(ts)
	if len(st.pend)+len(st.unflushed) > 0 && st.pendDay == day && int(st.pendRun) < w.runMax {
		if !b.grow(encoding.RunSampleMax) {
			return false
		}
		st.pendRun++
		return true
	}
	keyLen := 3 + len(st.device) + len(st.metric) + encoding.PointKeyFixed
	if !b.takeSize(int64(keyLen + 2 + encoding.RunHeaderMax + encoding.RunSampleMax)) {
		return false
	}
	st.pendDay, st.pendRun = day, 1
	return true
}

// writeRuns writes the readings of the journal as runs, each series'
// sorted first.
func (w *Writer) writeRuns(txn *badger.Txn) error {
	for _, st := range w.dirty {
		slices.SortFunc(st.unflushed, compareSamples)
		err := forRuns(st.unflushed, w.runMax, func(_ int32, run []Sample) error {
			e, err := runEntry(st, run)
			if err != nil {
				return err
			}
			return txn.Set(e.key, e.value)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// commitAndSync commits a part and syncs it, holding the store's sync
// lock: no other write may come between the two, or it could start a new
// memtable that db.Sync would sync instead of the part's. Only then does
// the uplink see the part's outbox entry.
func (w *Writer) commitAndSync(txn *badger.Txn, added uint64) error {
	s := w.store
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := w.commitPart(txn, added); err != nil {
		return err
	}
	if err := w.sync(); err != nil {
		return err
	}
	s.outboxSynced()
	return nil
}

// txnBudget tracks what a transaction may still take, by Badger's own
// accounting (Txn.checkSize), so that a commit can be split before Badger
// refuses an entry.
type txnBudget struct {
	count, size       int64
	maxCount, maxSize int64
}

// newTxnBudget returns the budget of a new transaction of db that keeps
// room for one more entry of reserve bytes (key, value and metadata).
func newTxnBudget(db *badger.DB, reserve int64) txnBudget {
	// Badger counts an entry that ends the transaction, of up to 30
	// bytes, and 10 bytes of version per entry.
	return txnBudget{count: 2, size: 30 + reserve + 10, maxCount: db.MaxBatchCount(), maxSize: db.MaxBatchSize()}
}

// take reports whether an entry of key and value fits, and counts it if so.
func (b *txnBudget) take(key, value []byte) bool {
	return b.takeSize(int64(len(key)+len(value)) + 2)
}

// grow reports whether n more bytes fit an entry already taken, and
// counts them if so.
func (b *txnBudget) grow(n int64) bool {
	if b.size+n >= b.maxSize {
		return false
	}
	b.size += n
	return true
}

// takeSize is take for an entry of n bytes of key, value and metadata.
func (b *txnBudget) takeSize(n int64) bool {
	count, size := b.count+1, b.size+n+10
	if count >= b.maxCount || size >= b.maxSize {
		return false
	}
	b.count, b.size = count, size
	return true
}

// metaEntrySize is the size of the reading count entry: key, value and
// metadata.
const metaEntrySize int64 = 1 + int64(len(encoding.MetaReadings)) + 8 + 2

// sync makes what was committed durable. Badger's Sync covers the
// memtable being written (and the value log); memtables it has switched
// away from are synced as they are flushed to tables.
func (w *Writer) sync() error {
	if w.store.noSync {
		return nil
	}
	if err := w.store.db.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

// commitPart commits txn together with the part's journal entry and the
// store's reading count grown by added, the readings the entry holds, and
// then brings the index up to date.
func (w *Writer) commitPart(txn *badger.Txn, added uint64) error {
	s := w.store
	var jkey []byte
	if w.jour.Count() > 0 {
		jkey = encoding.AppendJournalKey(nil, w.jseq)
		if err := txn.Set(jkey, w.jour.Value()); err != nil {
			return err
		}
	}
	s.mu.RLock()
	total := s.readings + added
	s.mu.RUnlock()
	if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaReadings), encoding.AppendUint64(nil, total)); err != nil {
		return err
	}
	if w.outbox.Count() > 0 {
		key := encoding.AppendOutboxKey(nil, s.outboxEnd())
		if err := txn.Set(key, w.outbox.Value()); err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	if w.outbox.Count() > 0 {
		s.outboxAdded(uint64(w.outbox.Count()))
		w.outbox.Reset()
	}
	w.journaled(jkey, &total)
	return nil
}

// journaled brings the Writer and the store's index up to date with a
// part whose readings are in the journal entry under jkey (nil: none),
// and the store's reading count with total (nil: unchanged).
func (w *Writer) journaled(jkey []byte, total *uint64) {
	s := w.store
	if jkey != nil {
		w.jkeys = append(w.jkeys, jkey)
		w.jseq++
		w.jour.Reset()
	}
	for k, d := range w.deltas {
		c := w.ckDeltas[k]
		c.Merge(d)
		w.ckDeltas[k] = c
	}
	clear(w.deltas)
	s.mu.Lock()
	if total != nil {
		s.readings = *total
	}
	for id, st := range w.created {
		// A series whose first reading starts the next part is not
		// stored yet: it is published with that part.
		if st.touched {
			w.published(id, st)
		}
	}
	for _, st := range w.touched {
		st.last = st.next
		for _, p := range st.pend {
			s.oldest = min(s.oldest, p.TS)
		}
	}
	for st, unit := range w.units {
		st.unit = unit
	}
	clear(w.units)
	s.mu.Unlock()
	for _, st := range w.touched {
		if len(st.pend) == 0 {
			continue
		}
		if len(st.unflushed) == 0 {
			w.dirty = append(w.dirty, st)
		}
		st.unflushed = append(st.unflushed, st.pend...)
		st.pend = st.pend[:0]
	}
}

// newPart starts a part of a commit: a new transaction, and its budget,
// which keeps room for the reading count, the journal entry and, with the
// outbox on, its entry. The next checkpoint must take the entry's delete:
// if it cannot, the journal is checkpointed first.
func (w *Writer) newPart() (*badger.Txn, txnBudget, error) {
	if !w.ckpt.takeSize(encoding.JournalKeyLen + 2) {
		if err := w.checkpoint(); err != nil {
			return nil, txnBudget{}, err
		}
		w.ckpt.takeSize(encoding.JournalKeyLen + 2)
	}
	b := newTxnBudget(w.store.db, metaEntrySize)
	b.takeSize(encoding.JournalEntryReserve)
	if w.opts.Outbox {
		b.takeSize(encoding.OutboxEntryReserve)
	}
	return w.store.db.NewTransaction(true), b, nil
}

// reserveJournal reports whether r fits the journal entry of the part
// under way, in the transaction and under the store's value limit, and
// counts it if so.
func (w *Writer) reserveJournal(b *txnBudget, r *Reading) bool {
	n := encoding.OutboxReadingMax(r)
	if w.jour.Size()+n > w.store.maxEntry {
		return false
	}
	return b.grow(int64(n))
}

// reserveOutbox reports whether r fits the outbox entry of the part under
// way, in the transaction and under the store's value limit, and counts it
// if so.
func (w *Writer) reserveOutbox(b *txnBudget, r *Reading) bool {
	if !w.opts.Outbox {
		return true
	}
	n := encoding.OutboxReadingMax(r)
	if w.outbox.Size()+n > w.store.maxEntry {
		return false
	}
	return b.grow(int64(n))
}

// isStored reports whether the sample smp of st is stored already: as an
// open point, one of the commit under way, or in a sealed bucket. Buckets
// are read from a snapshot taken once per commit: only sealing writes
// them.
func (w *Writer) isStored(st *seriesState, smp Sample) (bool, error) {
	if st.hasOpen(smp) {
		return true, nil
	}
	if w.snap == nil {
		w.snap = w.store.db.NewTransaction(false)
	}
	return w.store.inBucket(w.snap, Reading{Device: st.device, Metric: st.metric, TS: smp.TS, Value: smp.Value})
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{
		Commits:        w.commits.Load(),
		Stored:         w.stored.Load(),
		Duplicates:     w.duplicates.Load(),
		Failures:       w.failures.Load(),
		SyncNanos:      w.syncNanos.Load(),
		Sealed:         w.sealed.Load(),
		SealErrors:     w.sealErrors.Load(),
		Pruned:         w.pruned.Load(),
		PrunedReadings: w.prunedReadings.Load(),
		Checkpoints:    w.checkpoints.Load(),
		Refused:        w.refused.Load(),
	}
}
