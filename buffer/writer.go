package buffer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/cairn-gateway/cairn/aggregate"
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
	// WrongKind counts the readings not stored for being of the other
	// kind than their series (a number into a text series, or a text into
	// a number series), and TooManyStates those whose text would have been
	// one more than their series may hold (WriterOptions.MaxStates);
	// KindRefusal and StatesRefusal describe the first of each (nil:
	// none). The batch's other readings are stored (text.go).
	WrongKind     int
	TooManyStates int
	KindRefusal   *KindRefusal
	StatesRefusal *StatesRefusal
	Err           error // nil when every reading of the batch is on disk (or refused)
}

// WriterOptions configure a Writer. Zero values are defaults.
type WriterOptions struct {
	// MaxReadings caps the readings of one group commit (default 10,000).
	MaxReadings int
	// Wait is how long a group commit may wait for more readings after
	// its first came (default 0: it does not wait). It waits only while a
	// sensor not in it has sent within the last Wait, and never for a
	// publisher that waits for its acknowledgements (publishers.go): a
	// light stream from many sensors is then written in a few commits a
	// second, not one per message, which spares an SD card, and a lone
	// publisher is not held up.
	Wait time.Duration
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
	// Retention is the retention policy the Writer starts with (see
	// SetRetentionPolicy); a Retention runs it.
	Retention RetentionPolicy
	// Clock says whether the clock that Prune is given can be trusted
	// (clock.go): retention by age pauses while it cannot, and keeps the
	// spans of readings it stamped. Nil: the clock is trusted.
	Clock *Clock

	// MaxSeries caps the series of the store, and MaxSeriesPerDevice
	// those of one device (0: no limit). A reading that would make a new
	// series over either is refused (Result.Refused, series.go).
	MaxSeries          int
	MaxSeriesPerDevice int
	// MaxStates caps the distinct texts of a text series (default
	// DefaultMaxStates, at most MaxMaxStates). A reading with a new text
	// beyond it is refused (Result.TooManyStates, text.go).
	MaxStates int

	// CheckpointInterval is the longest the readings of a group commit stay
	// in the journal before a checkpoint writes them as runs and
	// aggregates (default 60 s; see journal.go). Sealing, rolling up and
	// pruning checkpoint first; queries read the journal (unflushed.go).
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
	Gathered       uint64 // group commits that waited for other sensors to join
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
	WrongKind      uint64 // readings refused for being of the other kind than their series
	TooManyStates  uint64 // readings refused for a text over their series' limit
}

// Writer is the single writer of a Store: it takes batches of readings from
// any number of goroutines, writes them in group commits (one transaction
// and one sync for everything that is queued), and then reports each batch's
// result in the order the batches were submitted.
type Writer struct {
	store *Store
	opts  WriterOptions
	queue chan request
	// gone is signalled by Forget after it queued its request: a commit
	// that sleeps while it waits for sensors wakes, takes it, and asks
	// again whether to wait (collect); one that sleeps for its floor does
	// not listen. Holds one signal.
	gone chan struct{}
	// steps carries one-step calls (SealDue, RollUp, Prune) to the Run
	// goroutine.
	steps chan stepRequest

	stopping  chan struct{} // closed when Run begins to stop
	stopped   chan struct{} // closed when Run has stopped
	closeOnce sync.Once
	mu        sync.RWMutex // guards closed; held for reading by Submit while it sends
	closed    bool

	commits, stored, duplicates, failures, syncNanos atomic.Uint64
	gathered                                         atomic.Uint64
	waits                                            atomic.Uint64 // sleeps of commits that waited (tests poll it)
	sealed, sealErrors, pruned, prunedReadings       atomic.Uint64
	checkpoints, refused                             atomic.Uint64
	wrongKind, tooManyStates                         atomic.Uint64
	pausedWhy                                        atomic.Pointer[string] // PausedReason; nil when taking batches
	pruneBusy                                        atomic.Int64           // nanoseconds of prune steps

	// Used by the Run goroutine only, each job's state with the job:
	groupCommit                        // the group commit (commit.go)
	pubs        publishers             // who sent recently, for the commit policy (publishers.go)
	journal     journalWriter          // the journal's entries it writes (commit.go; journal.go)
	ckpt        checkpointState        // the checkpoint (checkpoint.go)
	seal        sealer                 // sealing (seal.go)
	policy      RetentionPolicy        // the retention policy in force (policy.go, prune.go)
	pauses      [numPauseCauses]string // why no new batches are taken, by cause ("" for none; pause.go)
	runMax      int                    // the most readings of a run (see open.go)
	scratch     []byte                 // a series id being looked up (series.go)
	touched     []*seriesState         // series written in this commit; after a checkpoint, those it wrote
}

type request struct {
	from     string    // the publisher (SubmitFrom)
	sent     time.Time // when it was submitted; zero with Wait 0
	readings []Reading
	done     func(Result) // nil: publisher from is gone (Forget)
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
	if opts.MaxStates <= 0 {
		opts.MaxStates = DefaultMaxStates
	}
	opts.MaxStates = min(opts.MaxStates, MaxMaxStates)
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
		store:    s,
		policy:   opts.Retention.clone(),
		opts:     opts,
		runMax:   runMax,
		queue:    make(chan request, opts.QueueSize),
		gone:     make(chan struct{}, 1),
		steps:    make(chan stepRequest),
		stopping: make(chan struct{}),
		stopped:  make(chan struct{}),
		groupCommit: groupCommit{
			created:   make(map[string]*seriesState),
			createdBy: make(map[string]*deviceSeries),
			units:     make(map[*seriesState]unique.Handle[string]),
			newTexts:  make(map[*seriesState][]string),
			heard:     make(map[string]bool),
			deltas:    make(map[statKey]aggregate.Stats),
		},
		journal: journalWriter{end: s.outboxEnd()},
		pubs:    newPublishers(opts.Wait),
		ckpt:    checkpointState{budget: newTxnBudget(s.db, checkpointReserve), deltas: make(map[statKey]aggregate.Stats)},
	}
}

// Submit queues readings for the next group commit, from no publisher in
// particular: SubmitFrom with from "".
func (w *Writer) Submit(ctx context.Context, readings []Reading, done func(Result)) error {
	return w.SubmitFrom(ctx, "", readings, done)
}

// SubmitFrom queues readings sent by publisher from (an MQTT client id)
// for the next group commit. done is called exactly
// once, from the Writer's goroutine, after the commit holding the readings
// was synced (or failed); calls to done follow the order of Submit calls.
// done must return quickly: it holds up every later result. A batch without
// readings is allowed: its done is called in order like any other.
//
// Submit blocks while the queue is full. It returns ErrClosed, and never
// calls done, once the Writer is stopping, or ctx.Err() if ctx ends first.
// A reading whose device id or metric name is not valid (CheckDevice,
// CheckMetric) fails the whole batch at once, with an error naming it.
func (w *Writer) SubmitFrom(ctx context.Context, from string, readings []Reading, done func(Result)) error {
	if err := checkNames(readings); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	req := request{from: from, readings: readings, done: done}
	if w.opts.Wait > 0 {
		req.sent = time.Now()
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case w.queue <- req:
		return nil
	case <-w.stopping:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Forget tells the commit policy that publisher from is gone: no commit
// waits for it any more, and one that sleeps waiting for sensors wakes to
// ask again. It never blocks: with the queue full, the
// publisher is forgotten once it has sent nothing for Wait.
func (w *Writer) Forget(from string) {
	if w.opts.Wait <= 0 {
		return
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return
	}
	select {
	case w.queue <- request{from: from}:
	default:
		return
	}
	select {
	case w.gone <- struct{}{}:
	default:
	}
}

// Run writes group commits until ctx ends, then commits everything that was
// submitted before it stopped accepting, and returns nil.
func (w *Writer) Run(ctx context.Context) error {
	tick := time.NewTicker(w.opts.SealCheck)
	defer tick.Stop()
	w.ckpt.due = time.NewTimer(w.opts.CheckpointInterval)
	w.ckpt.due.Stop()
	defer w.ckpt.due.Stop()
	w.store.setRunning(w)
	defer w.store.setRunning(nil)
	defer close(w.stopped)
	for {
		queue := w.queue
		if w.paused() {
			queue = nil // batches wait in the queue, and Submit blocks once it is full
		}
		select {
		case req := <-queue:
			if req.done == nil {
				w.pubs.forget(req.from)
				continue
			}
			w.batch = w.batch[:0]
			w.pubs.begin()
			w.take(req)
			w.collect(ctx)
			w.commit()
		case <-w.ckpt.due.C:
			w.ckpt.armed = false
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
		w.pubs.begin()
		n := 0
	drain:
		for n < w.opts.MaxReadings {
			select {
			case req := <-w.queue:
				if req.done != nil {
					w.batch = append(w.batch, req)
					n += len(req.readings)
				}
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

// do runs step on the Run goroutine and returns its result. If ctx ends
// first, do returns ctx.Err() at once and the step may still run later:
// a caller reads what the step writes only when do returned nil.
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

// Ping returns nil once the Writer's goroutine has taken a step that does
// nothing: it is not stuck in a group commit, a seal or retention. It
// blocks while the Writer is busy, so give ctx a deadline. It returns
// ErrClosed once the Writer is stopping, or ctx.Err() if ctx ends first.
func (w *Writer) Ping(ctx context.Context) error {
	return w.do(ctx, func() error { return nil })
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{
		Commits:        w.commits.Load(),
		Gathered:       w.gathered.Load(),
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
		WrongKind:      w.wrongKind.Load(),
		TooManyStates:  w.tooManyStates.Load(),
	}
}
