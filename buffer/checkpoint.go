package buffer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// checkpointState is the state of the journal's checkpoint. Used by the
// Run goroutine only.
type checkpointState struct {
	budget    txnBudget                   // what the next checkpoint may still take
	deltas    map[statKey]aggregate.Stats // aggregates of the readings in the journal
	states    map[statKey]struct{}        // text series' records the next checkpoint writes, reserved (states.go)
	dirty     []*seriesState              // series with readings in the journal
	due       *time.Timer                 // runs while the journal holds readings
	armed     bool                        // due runs
	replaying bool                        // the Writer of replayJournal: its series are not left to seal
}

// checkpoint writes the readings of the log since the last checkpoint as
// runs and their aggregates into records, and moves the checkpoint's
// cursor past them, in one synced transaction. If the transaction fails,
// nothing changes: the log keeps them. If only the sync fails, the Writer
// goes on from what was committed, as after a commit whose sync failed.
// The entries no upstream needs are deleted after it (not synced: an
// entry left behind the cursor is deleted by a later checkpoint).
func (w *Writer) checkpoint() error {
	if w.journal.parts == 0 && len(w.ckpt.dirty) == 0 && len(w.journal.legacy) == 0 {
		return nil
	}
	s := w.store
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := w.writeRuns(txn); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := w.writeStats(txn); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := w.writeStates(txn); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, k := range w.journal.legacy {
		if err := txn.Delete(k); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	s.outbox.mu.Lock()
	moved := w.journal.end > s.outbox.ckpt
	s.outbox.mu.Unlock()
	if moved {
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaCheckpoint), encoding.AppendUint64(nil, w.journal.end)); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if err := w.commitCheckpoint(txn, moved); err != nil {
		return err
	}
	if moved {
		if err := s.trimLogBehind(); err != nil {
			s.log.Warn("could not delete log entries every reader has passed; tried again at the next checkpoint", "err", err)
		}
	}
	return nil
}

// commitCheckpoint commits and syncs the checkpoint's transaction, holding
// the store's sync lock, and brings the Writer up to date.
func (w *Writer) commitCheckpoint(txn *badger.Txn, moved bool) error {
	s := w.store
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if moved {
		s.outbox.mu.Lock()
		s.outbox.ckpt, s.outbox.hasCkpt = w.journal.end, true
		s.outbox.mu.Unlock()
	}
	w.checkpointed()
	if err := w.sync(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// checkpointReserve is what a checkpoint's transaction keeps room for
// besides its runs and records: the checkpoint's cursor.
const checkpointReserve = 1 + int64(len(encoding.MetaCheckpoint)) + 8 + 2

// checkpointed brings the Writer up to date with a committed checkpoint.
func (w *Writer) checkpointed() {
	w.statsCommitted()
	clear(w.ckpt.deltas)
	clear(w.ckpt.states)
	for _, st := range w.ckpt.dirty {
		forRuns(st.unflushed, w.runMax, func(day int32, run []Sample) error { // sorted by writeRuns
			st.addRun(day, run)
			return nil
		})
		w.seal.opened += len(st.unflushed)
		st.unflushed = st.unflushed[:0]
		if !st.flushed && !w.ckpt.replaying {
			st.flushed = true
			w.seal.flushed = append(w.seal.flushed, st)
		}
	}
	w.ckpt.dirty = w.ckpt.dirty[:0]
	w.journal.parts = 0
	w.journal.legacy = w.journal.legacy[:0]
	w.ckpt.budget = newTxnBudget(w.store.db, checkpointReserve)
	if w.ckpt.armed {
		w.ckpt.due.Stop()
		w.ckpt.armed = false
	}
	w.checkpoints.Add(1)
}

// checkpointNow checkpoints, then seals and rolls up the series it wrote,
// as a commit once did, logging a failure. Sealing waits for a
// checkpoint: the open points it takes must be runs.
func (w *Writer) checkpointNow() error {
	if err := w.checkpoint(); err != nil {
		w.store.log.Error("checkpoint failed; what it did not write stays in the journal, and it is tried again", "err", err)
		return err
	}
	w.sealFlushed()
	return nil
}

// Checkpoint has the running Writer checkpoint its journal, then seal the
// full buckets and roll up the hours that are over, as it does
// CheckpointInterval after a commit, and returns the result. It is the
// one-step form of that, for tests and tools.
func (w *Writer) Checkpoint(ctx context.Context) error {
	return w.do(ctx, w.checkpointNow)
}

// reserveReading reports whether a reading at ts of st, a text reading if
// text, fits the checkpoint budget b (its run and its records), and counts
// it if so.
func (w *Writer) reserveReading(b *txnBudget, st *seriesState, ts int64, text bool) bool {
	try, day, run := *b, st.pendDay, st.pendRun
	if !w.reserveRun(&try, st, ts) || !w.reserveStats(&try, st, ts, text) {
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
	for _, st := range w.ckpt.dirty {
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
