package buffer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Sealing packs the open points of a series into buckets of at most
// WriterOptions.BucketSamples readings of one UTC day (see encoding.KindBucket):
//
//   - a series-day with a full bucket's worth of open points is sealed
//     right after the checkpoint that filled it, whole buckets only;
//   - every SealCheck, the open points of a series-day are sealed whole
//     when a newer day has begun (by the series' newest reading or by the
//     clock), or when the series got nothing new for SealIdle.
//
// Points that fall within the time span of a sealed bucket (late readings)
// are merged with it, so that the buckets of a series never overlap. One
// seal is one transaction: it writes the new buckets and deletes the points
// and the buckets they replace, so a crash loses or doubles nothing.

// sealCandidate is a series-day to seal.
type sealCandidate struct {
	st    *seriesState
	day   int32
	whole bool  // seal every open point, not only whole buckets
	last  int64 // newest timestamp sealed, once planned
}

// sealer is the state of sealing: the series-days queued, the series
// checkpoints wrote since sealFlushed last ran, and scratch space. Used by
// the Writer's goroutine only.
type sealer struct {
	queue   []sealCandidate
	sorted  []Sample // the open points of the series-day, sorted
	edit    openEdit // the planned change of its open points
	samples []Sample // samples of overlapping buckets
	old     [][]byte // keys of overlapping buckets
	merged  []Sample // the samples of the planned buckets
	sets    []kv     // the planned buckets, then the runs of the points kept
	dels    [][]byte // the planned deletes: runs, then replaced buckets

	flushed []*seriesState // series checkpointed, not yet sealed and rolled up
	last    time.Time      // when sealFlushed last ran
	// opened counts the samples checkpoints added to open points since
	// sealFlushed last ran (sealAfterOpened).
	opened int
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

// sealAfterCommits is how often, at most (unless sealAfterOpened comes
// first), the series that checkpoints in
// the middle of commits wrote are sealed and rolled up after a commit: a
// busy gateway checkpoints every few commits, and sealing after each of
// them cost a drain a tenth of its rate.
const sealAfterCommits = time.Second

// sealAfterOpened is how many samples checkpoints in the middle of
// commits may add to open points before the series they wrote are sealed
// after the commit, sooner than sealAfterCommits (so at most this plus
// what that commit's checkpoints added): a drain stores 300,000
// readings a second or more, and open points are held in memory until
// sealed, 16 bytes each and more as their slices grow. A second of them
// was 5 to 6 MiB of a drain's heap, which the runtime doubles. 16 Ki
// samples is 256 KiB: at 64 Ki they were still 1.6 MiB of the 6 to 7
// MiB a drain of 200,000 messages holds live, and its peak RSS 28.2
// MiB against 26.9 at 16 Ki (17 and 11 runs), as fast, with as many
// bytes written (docs/performance.md). A seal writes whole buckets only,
// so a series' points short of a bucket stay open whatever the bound (a
// bucket of every series of a hundred sensors with two metrics each at
// the default store.bucket_samples, 200, is 40,000 samples); a seal
// sooner frees each bucket's points once they fill it. A steady 20,000
// readings a second reach the bound in 0.8 s, about when
// sealAfterCommits comes.
const sealAfterOpened = 16 << 10

// sealFlushed seals and rolls up the series that checkpoints wrote since
// the last time: right after the checkpoint when it came between commits,
// after a commit when it came in the middle of one (sealing then would
// change buckets under the commit's duplicate check).
func (w *Writer) sealFlushed() {
	w.seal.last = time.Now()
	w.seal.opened = 0
	if len(w.seal.flushed) == 0 {
		return
	}
	w.touched = append(w.touched[:0], w.seal.flushed...)
	if !w.opts.noSeal {
		w.queueFull()
		w.sealNow()
	}
	if w.journal.parts > 0 || len(w.ckpt.dirty) > 0 {
		// Roll-ups read the minute records on disk, and the journal holds
		// readings whose deltas are not there yet: the series wait in
		// w.seal.flushed for the next checkpoint that empties it.
		w.touched = w.touched[:0]
		return
	}
	w.rollUpTouched()
	for _, st := range w.seal.flushed {
		st.flushed = false
	}
	w.seal.flushed = w.seal.flushed[:0]
	w.touched = w.touched[:0]
}

// queueFull queues the series-days of w.touched (the series the last
// checkpoints wrote) that hold a full bucket of open points.
func (w *Writer) queueFull() {
	for _, st := range w.touched {
		for day, open := range st.days() {
			if len(open) >= w.opts.BucketSamples {
				w.seal.queue = append(w.seal.queue, sealCandidate{st: st, day: day})
			}
		}
	}
}

// queueDue queues the series-days whose open points are due to be sealed
// whole at now: a newer day has begun, or the series is idle.
func (w *Writer) queueDue(now time.Time) {
	today := encoding.DayOf(now.UnixNano())
	for _, st := range w.store.series { // only this goroutine writes the map
		idle := now.UnixNano()-st.lastWrite >= int64(w.opts.SealIdle)
		newest := encoding.DayOf(st.next)
		for day := range st.days() {
			if idle || day < newest || day < today {
				w.seal.queue = append(w.seal.queue, sealCandidate{st: st, day: day, whole: true})
			}
		}
	}
}

// sealQueued seals the queued series-days, as many to a transaction as
// Badger takes. It returns the first error; what was not sealed stays
// open, to be sealed on a later try.
func (w *Writer) sealQueued() error {
	q := w.seal.queue
	defer func() { w.seal.queue = w.seal.queue[:0] }()
	// Read from a snapshot: an iterator of a read-write transaction sorts
	// all its pending writes first. The candidates are distinct
	// series-days, so no seal needs to read another's uncommitted writes;
	// a series-day sealed in parts needs its own committed ones, so the
	// snapshot is renewed after each commit.
	snap := w.store.db.NewTransaction(false)
	defer func() { snap.Discard() }()
	var (
		txn    *badger.Txn
		budget txnBudget
		done   []sealCandidate
		sealed []int
		edits  []openEdit
	)
	commit := func() error {
		if txn == nil {
			return nil
		}
		defer txn.Discard()
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("seal: %w", err)
		}
		// Not synced here: it rides on the next group commit's sync, or on
		// the flush of its memtable. If it is lost in a power cut while a
		// later seal that merged its buckets survives, its points come back
		// beside the merged bucket; Open deletes such points (see repair).
		snap.Discard()
		snap = w.store.db.NewTransaction(false)
		for i, c := range done {
			edits[i].apply()
			c.st.sealedLast = max(c.st.sealedLast, c.last)
			w.sealed.Add(uint64(sealed[i]))
		}
		txn, done, sealed, edits = nil, done[:0], sealed[:0], edits[:0]
		return nil
	}
	for _, c := range q {
		limit := len(c.st.points(c.day))
		for {
			n, err := w.planSeal(snap, c, limit)
			if err != nil {
				return errors.Join(fmt.Errorf("seal %s/%s: %w", c.st.device, c.st.metric, err), commit())
			}
			if n == 0 {
				break
			}
			if txn == nil {
				txn = w.store.db.NewTransaction(true)
				budget = newTxnBudget(w.store.db, 0)
			}
			fitted := w.seal.fits(&budget)
			if !fitted && len(done) > 0 {
				// Full: commit the seals so far and try afresh.
				if err := commit(); err != nil {
					return err
				}
				txn = w.store.db.NewTransaction(true)
				budget = newTxnBudget(w.store.db, 0)
				fitted = w.seal.fits(&budget)
			}
			if !fitted {
				// Too big for one transaction even alone: seal fewer.
				txn.Discard()
				txn = nil
				if limit = n / 2; limit < w.opts.BucketSamples {
					return errors.Join(fmt.Errorf("seal %s/%s: %d readings do not fit one transaction", c.st.device, c.st.metric, n), commit())
				}
				continue
			}
			if err := w.seal.apply(txn); err != nil {
				// Half applied: drop the whole transaction (its seals are
				// tried again later; their points are still open).
				txn.Discard()
				return fmt.Errorf("seal %s/%s: %w", c.st.device, c.st.metric, err)
			}
			c.last = w.seal.merged[len(w.seal.merged)-1].TS
			done = append(done, c)
			sealed = append(sealed, n)
			edits = append(edits, w.seal.edit)
			if limit >= len(c.st.points(c.day)) {
				break
			}
			// Sealed in parts: commit this one, then seal the rest.
			if err := commit(); err != nil {
				return err
			}
		}
	}
	return commit()
}

// planSeal prepares in w.seal the sealing of the open points of one
// series-day, at most limit of them (the oldest), reading sealed buckets
// from snap. It returns the number of open points it seals.
func (w *Writer) planSeal(snap *badger.Txn, c sealCandidate, limit int) (int, error) {
	st, sc := c.st, &w.seal
	open := append(sc.sorted[:0], st.points(c.day)...)
	sc.sorted = open
	slices.SortFunc(open, compareSamples)
	n := min(len(open), limit)
	if !c.whole || n < len(open) {
		n -= n % w.opts.BucketSamples
	}
	if n == 0 {
		return 0, nil
	}
	pts := open[:n]
	// Open points are distinct: those up to the n-th are the n sealed.
	cut := pts[n-1]
	edit, err := st.planDrop(c.day, func(p Sample) bool { return !cut.Less(p) })
	if err != nil {
		return 0, err
	}
	if edit.removed != n {
		return 0, fmt.Errorf("day %d: %d open points up to the %d-th (not distinct?)", c.day, edit.removed, n)
	}
	sc.edit = edit
	sc.samples, sc.old = sc.samples[:0], sc.old[:0]
	if pts[0].TS <= st.sealedLast { // late points: merge the buckets they touch
		if err := w.overlapping(snap, st, c.day, pts[0], pts[n-1]); err != nil {
			return 0, err
		}
	}
	sc.merged = append(append(sc.merged[:0], pts...), sc.samples...)
	slices.SortFunc(sc.merged, compareSamples)
	sc.merged = slices.CompactFunc(sc.merged, Sample.Same)

	sc.sets = sc.sets[:0]
	for chunk := range slices.Chunk(sc.merged, w.opts.BucketSamples) {
		val, err := encoding.AppendBucket(nil, chunk)
		if err != nil {
			return 0, err
		}
		if len(val) > w.store.maxValue {
			return 0, fmt.Errorf("bucket of %d bytes is over the %d-byte limit", len(val), w.store.maxValue)
		}
		sc.sets = append(sc.sets, kv{encoding.AppendBucketKey(nil, st.device, st.metric, chunk[0]), val})
	}
	sc.sets = edit.sets(sc.sets)
	sc.dels = append(edit.dels(sc.dels[:0]), sc.old...)
	return n, nil
}

// kv is a key and a value to write.
type kv struct{ key, value []byte }

// fits reports whether the planned seal fits in b, and counts it if so.
func (sc *sealer) fits(b *txnBudget) bool {
	try := *b
	for _, e := range sc.sets {
		if !try.take(e.key, e.value) {
			return false
		}
	}
	for _, k := range sc.dels {
		if !try.take(k, nil) {
			return false
		}
	}
	*b = try
	return true
}

// apply writes the planned seal into txn: the buckets it replaces and its
// points are deleted, its buckets written (a new bucket may reuse the key
// of one it replaces, so deletes go first).
func (sc *sealer) apply(txn *badger.Txn) error {
	for _, k := range sc.dels {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	for _, e := range sc.sets {
		if err := txn.Set(e.key, e.value); err != nil {
			return err
		}
	}
	return nil
}

// compareSamples orders samples as a series stores them.
func compareSamples(a, b Sample) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// overlapping appends to w.seal.samples the samples of the series-day's
// buckets that overlap [lo, hi], and their keys to w.seal.old.
func (w *Writer) overlapping(txn *badger.Txn, st *seriesState, day int32, lo, hi Sample) error {
	sc := &w.seal
	prefix := encoding.AppendDay(encoding.AppendBucketPrefix(nil, st.device, st.metric), day)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		first, err := encoding.ParseBucketTail(item.Key())
		if err != nil {
			return err
		}
		if hi.Less(first) {
			break // this bucket and the later ones start after the points
		}
		err = item.Value(func(v []byte) error {
			h, err := encoding.ParseBucketHeader(v)
			if err != nil {
				return err
			}
			if h.Last < lo.TS {
				return nil // ends before the points
			}
			start := len(sc.samples)
			if sc.samples, err = encoding.DecodeBucket(sc.samples, v); err != nil {
				return err
			}
			if last := sc.samples[len(sc.samples)-1]; last.Less(lo) {
				sc.samples = sc.samples[:start]
				return nil
			}
			sc.old = append(sc.old, item.KeyCopy(nil))
			return nil
		})
		if err != nil {
			return fmt.Errorf("bucket %q: %w", item.Key(), err)
		}
	}
	return nil
}

// inBucket reports whether the reading r is in a sealed bucket of its
// series, as txn sees it.
func (s *Store) inBucket(txn *badger.Txn, r Reading) (bool, error) {
	smp := Sample{TS: r.TS, Value: r.Value}
	samples, err := s.bucketHolding(txn, r.Device, r.Metric, smp)
	if err != nil {
		return false, err
	}
	i, ok := slices.BinarySearchFunc(samples, smp, compareSamples)
	return ok && samples[i].Same(smp), nil
}

// bucketHolding returns the samples of the sealed bucket of the series
// that can hold at, as txn sees it: buckets do not overlap, so only the
// one whose first sample is the last at or before at (by the order of
// their keys), on at's day, whose last timestamp is not before at's. It
// returns none if no bucket can.
func (s *Store) bucketHolding(txn *badger.Txn, device, metric string, at Sample) ([]Sample, error) {
	prefix := encoding.AppendBucketPrefix(nil, device, metric)
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: prefix})
	defer it.Close()
	it.Seek(encoding.AppendBucketTail(prefix[:len(prefix):len(prefix)], at))
	if !it.Valid() {
		return nil, nil
	}
	item := it.Item()
	first, err := encoding.ParseBucketTail(item.Key())
	if err != nil {
		return nil, err
	}
	if encoding.DayOf(first.TS) != encoding.DayOf(at.TS) {
		return nil, nil
	}
	var samples []Sample
	err = item.Value(func(v []byte) error {
		h, err := encoding.ParseBucketHeader(v)
		if err != nil || h.Last < at.TS {
			return err
		}
		samples, err = encoding.DecodeBucket(nil, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", item.Key(), err)
	}
	return samples, nil
}
