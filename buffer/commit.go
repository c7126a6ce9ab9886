package buffer

import (
	"context"
	"fmt"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"time"
	"unique"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// groupCommit is the state of the group commit, the Writer's main job:
// the batches it gathers and the part of the commit under way. Used by
// the Run goroutine only.
type groupCommit struct {
	batch     []request
	results   []Result
	snap      *badger.Txn                            // read snapshot of the commit, if one was needed
	created   map[string]*seriesState                // series new in this commit
	createdBy map[string]*deviceSeries               // how many of them each device has
	deltas    map[statKey]aggregate.Stats            // aggregates of the commit part under way
	written   []writtenStats                         // records written by the commit part under way
	units     map[*seriesState]unique.Handle[string] // units the commit part under way changes (unit.go)
	newTexts  map[*seriesState][]string              // texts the commit part under way adds to dictionaries (text.go)
	heard     map[string]bool                        // devices the part under way heard: whether it writes their time (heard.go)
	heardLast string                                 // the last of them, to look up the map once per run of one device's readings
	heardAt   int64                                  // when the commit under way heard them (ns)
}

// journalWriter is the Writer's side of the log (outbox.go): the entry of
// the commit part under way, and where the entries committed since the
// last checkpoint end. Used by the Run goroutine only.
type journalWriter struct {
	entry encoding.OutboxEncoder // entry of the commit part under way
	parts int                    // entries committed since the last checkpoint
	end   uint64                 // where the last of them ends
	// legacy are the journal entries of a store of version 4 or older
	// that the checkpoint under way writes, to delete with it (Open).
	legacy [][]byte
}

// collect adds queued requests to w.batch until it holds MaxReadings, or
// the queue is empty and no sensor that may still join it has sent within
// Wait (publishers.go), or Wait has passed since its first request came,
// or ctx ends. A commit that waited for other sensors, and to which
// readings keep coming, gathers for gatherFloor at least, or until it
// holds floorReadings.
func (w *Writer) collect(ctx context.Context) {
	n := len(w.batch[0].readings)
	first := time.Now()
	floor := first.Add(min(gatherFloor, w.opts.Wait))
	came := true // whether readings came since collect last slept
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// The signal of a publisher that went before: its request was queued
	// before it, and is taken below, or was already.
	select {
	case <-w.gone:
	default:
	}
	for n < w.opts.MaxReadings {
		select {
		case req := <-w.queue:
			k := w.take(req)
			n += k
			came = came || k > 0
			continue
		default:
		}
		if w.opts.Wait <= 0 {
			return
		}
		now := time.Now()
		until := first.Add(w.opts.Wait)
		if !now.Before(until) {
			return
		}
		// Sleep to the end of the wait, or a slice of it, and then take
		// what came meanwhile: waking for every message that joins cost
		// more than the commit it gathers.
		slice := gatherSlice
		gone := w.gone // wakes a sleep that waits for sensors, whose publisher may go
		t := w.pubs.until(now)
		if t.IsZero() {
			if !came || !w.pubs.gathered() || !now.Before(floor) || n >= floorReadings {
				return
			}
			// No sensor is awaited: a client that goes has nothing to do
			// with the floor, and waking for it would end the floor on a
			// slice cut short to which nothing came.
			t, slice, gone = floor, floorSlice, nil
		}
		sleep := min(minTime(until, t).Sub(now), slice)
		came = false
		w.waits.Add(1)
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-timer.C:
		case <-gone:
			// A publisher went, maybe one the commit waits for: a
			// one-shot client (connect, publish, disconnect) that sends
			// again at once held the next one's commit to the slice's
			// end.
		case <-ctx.Done():
			return
		}
	}
}

// gatherSlice is how long a commit that waits for more readings sleeps at
// most before it takes what came and asks again whether to wait: a
// commit ends at most that long after the last sensor it waited for
// joined it.
const gatherSlice = 20 * time.Millisecond

// gatherFloor is how long a commit that waited for other sensors gathers
// at least (Wait if shorter), while readings keep coming: sensors that
// send every few milliseconds have all joined a commit within a slice,
// and a commit each time they had was 45 a second at 10,000 messages
// a second, a tenth of the CPU in syncs and their wakeups. Past the
// point where no sensor is awaited, the commit sleeps floorSlice at a
// time and ends after one to which nothing came: a lone publisher that
// has sent its window of unacknowledged messages, or whose broker holds
// them, sends nothing more until the commit is done, and waits one
// floorSlice more for it (among publishers that keep sending, until the
// floor); a commit that waited for nobody does not wait. A commit of
// floorReadings needs no floor: its sync is a small part of it, and a
// drain, whose commits are larger, went a tenth slower with one (its
// larger commits held more of the heap the memory limit bounds).
const (
	gatherFloor   = 50 * time.Millisecond
	floorSlice    = 5 * time.Millisecond
	floorReadings = 1000
)

// take adds req to w.batch, or forgets its publisher if it is gone, and
// returns the readings it added.
func (w *Writer) take(req request) int {
	if req.done == nil {
		w.pubs.forget(req.from)
		return 0
	}
	w.batch = append(w.batch, req)
	if w.opts.Wait > 0 {
		w.pubs.take(req.from, req.readings, req.sent, time.Now())
	}
	return len(req.readings)
}

// commit writes w.batch in one transaction, syncs, and reports results.
func (w *Writer) commit() {
	start := time.Now()
	if w.pubs.gathered() {
		w.gathered.Add(1)
	}
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
	w.pubs.done(time.Now()) // before any result: a publisher may answer at once
	for i, req := range w.batch {
		res := w.results[i]
		if err != nil {
			res = Result{Err: err}
		} else {
			w.stored.Add(uint64(res.Stored))
			w.duplicates.Add(uint64(res.Duplicates))
			w.refused.Add(uint64(res.Refused))
			if res.WrongKind+res.TooManyStates > 0 {
				w.wrongKind.Add(uint64(res.WrongKind))
				w.tooManyStates.Add(uint64(res.TooManyStates))
			}
		}
		req.done(res)
		w.batch[i] = request{} // let the readings go
	}
	if w.seal.opened >= sealAfterOpened || time.Since(w.seal.last) >= w.opts.sealAfter {
		w.sealFlushed()
	}
	if w.journal.parts > 0 && !w.ckpt.armed && w.ckpt.due != nil {
		w.ckpt.due.Reset(w.opts.CheckpointInterval)
		w.ckpt.armed = true
	}
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
		clear(w.newTexts)
		w.forgetHeard()
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
	w.heardAt = now.UnixNano()
	w.journal.entry.Reset()
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
			var (
				textID   uint32
				textSize int64 // of a new text's entry
			)
			if r.Word != "" && r.Text == "" && w.isTextSeries(st) {
				r.Text, r.Value = r.Word, 0 // a state word, in a text series, is a text
			}
			if r.Text != "" {
				var what textKind
				textID, what = w.textID(st, r.Text)
				switch what {
				case kindWrong, kindTooMany:
					w.refuseKind(&w.results[i], st, &r, what)
					continue
				case kindNewText:
					textSize = textEntrySize(st, r.Text)
				}
				smp.Value = float64(textID)
			} else if w.isTextSeries(st) {
				w.refuseKind(&w.results[i], st, &r, kindWrong)
				continue
			}
			if textSize == 0 && r.TS <= st.next { // a new text is not stored yet
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
			if !w.reserve(&budget, st, &r, unitSize, textSize) {
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
				w.reserve(&budget, st, &r, unitSize, textSize) // an empty part and checkpoint take a reading
			}
			if newUnit {
				if err := w.setUnit(txn, st, unit); err != nil {
					return err
				}
			}
			if textSize > 0 {
				if err := w.setText(txn, st, textID, r.Text); err != nil {
					return err
				}
			}
			if err := w.hear(txn, &budget, st.device); err != nil {
				return err
			}
			w.hold(st, smp, r.Text != "")
			w.journal.entry.Add(&r)
			st.lastWrite = now.UnixNano()
			w.results[i].Stored++
			added++
		}
	}
	return w.commitAndSync(txn, added)
}

// hold adds a new sample of st to the part under way: to its aggregates
// (a number's; a text reading's sample is its text's id, text.go), and
// to the series' pending points.
func (w *Writer) hold(st *seriesState, smp Sample, text bool) {
	if !text {
		w.addStats(st, smp.TS, smp.Value)
	}
	if !st.touched {
		st.touched = true
		w.touched = append(w.touched, st)
	}
	st.next = max(st.next, smp.TS)
	st.pend = append(st.pend, smp)
}

// reserve reports whether r of st fits the part under way (its log entry,
// the entry of its series' unit, of unitSize bytes, when it changes it,
// and that of a new text, of textSize bytes) and the next checkpoint (its
// run and its records), and counts it in both if so.
func (w *Writer) reserve(part *txnBudget, st *seriesState, r *Reading, unitSize, textSize int64) bool {
	try := *part
	if unitSize > 0 && !try.takeSize(unitSize) {
		return false
	}
	if textSize > 0 && !try.takeSize(textSize) {
		return false
	}
	if !w.reserveJournal(&try, r) || !w.reserveReading(&w.ckpt.budget, st, r.TS, r.Text != "") {
		return false
	}
	*part = try
	return true
}

// reserveJournal reports whether r fits the log entry of the part
// under way, in the transaction and under the store's value limit, and
// counts it if so.
func (w *Writer) reserveJournal(b *txnBudget, r *Reading) bool {
	n := encoding.OutboxReadingMax(r)
	if w.journal.entry.Size()+n > w.store.maxEntry {
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

// newPart starts a part of a commit: a new transaction, and its budget,
// which keeps room for the reading count and the log entry.
func (w *Writer) newPart() (*badger.Txn, txnBudget, error) {
	b := newTxnBudget(w.store.db, metaEntrySize)
	b.takeSize(encoding.OutboxEntryReserve)
	return w.store.db.NewTransaction(true), b, nil
}

// commitAndSync commits a part and syncs it, holding the store's sync
// lock: no other write may come between the two, or it could start a new
// memtable that db.Sync would sync instead of the part's. Only then do
// the upstreams see the part's log entry.
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

// commitPart commits txn together with the part's log entry and the
// store's reading count grown by added, the readings the entry holds, and
// then brings the index up to date.
func (w *Writer) commitPart(txn *badger.Txn, added uint64) error {
	s := w.store
	n := uint64(w.journal.entry.Count())
	if n > 0 {
		if err := txn.Set(encoding.AppendOutboxKey(nil, s.outboxEnd()), w.journal.entry.Value()); err != nil {
			return err
		}
	}
	s.mu.RLock()
	total := s.readings + added
	s.mu.RUnlock()
	if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaReadings), encoding.AppendUint64(nil, total)); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	if n > 0 {
		s.outboxAdded(n)
	}
	w.journaled(n > 0, &total)
	return nil
}

// journaled brings the Writer and the store's index up to date with a
// part, whose readings are in a new log entry if entry, and the store's
// reading count with total (nil: unchanged).
func (w *Writer) journaled(entry bool, total *uint64) {
	s := w.store
	if entry {
		w.journal.parts++
		w.journal.end = s.outboxEnd()
		w.journal.entry.Reset()
	}
	for k, d := range w.deltas {
		c := w.ckpt.deltas[k]
		c.Merge(d)
		w.ckpt.deltas[k] = c
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
	w.textsCommitted()
	w.heardCommitted()
	s.mu.Unlock()
	for _, st := range w.touched {
		if len(st.pend) == 0 {
			continue
		}
		if len(st.unflushed) == 0 {
			w.ckpt.dirty = append(w.ckpt.dirty, st)
		}
		st.unflushed = append(st.unflushed, st.pend...)
		st.pend = st.pend[:0]
	}
}

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
