package buffer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The journal. A group commit writes the readings it stores as one entry,
//
//	'j' seq(8B BE) → the readings, encoded as an outbox entry (outbox.go)
//
// beside the reading count (and the outbox entry), and syncs: that is what
// makes them durable. A checkpoint then writes the readings of every entry
// since the last one as runs of open points (open.go), merges their
// aggregates into their minute records (stats.go) and deletes the entries,
// in one synced transaction. So a series costs a key and a record per
// checkpoint, not per commit: at a steady 10,000 messages a second from a
// client with 100 in flight, a commit holds about one reading of each
// series, and the keys and records of each commit were most of cairn's
// work.
//
// A checkpoint comes CheckpointInterval after the first commit it covers,
// when the next reading would not fit its transaction, and before anything
// that changes what is stored: sealing, rolling up, pruning. Those see the
// journal empty, and every stored reading in the runs, buckets and records
// they read. Queries read the journal where the Writer holds it
// (unflushed.go), and so do the seeks for the oldest reading
// (Store.journalOldest). Opening the
// store checkpoints the entries a crash left (replayJournal): each entry
// is written whole, with its delete, in one transaction, so a crash during
// that loses or doubles nothing either.

const (
	// defaultCheckpointInterval is WriterOptions.CheckpointInterval's
	// default. A checkpoint writes a run and a minute record for every
	// series with readings in the journal: at a light stream (100
	// sensors, once a second each) checkpoints every 5 s wrote about a
	// third of what cairn wrote to the SD card; a busy stream fills the
	// journal's entries and checkpoints sooner anyway.
	defaultCheckpointInterval = 60 * time.Second
	// flushTimeout bounds how long a query waits for the Writer's
	// checkpoint.
	flushTimeout = 30 * time.Second
)

// setRunning records the Writer whose Run is under way (nil: none).
func (s *Store) setRunning(w *Writer) {
	s.flushMu.Lock()
	s.running = w
	s.flushMu.Unlock()
}

// runningWriter returns the Writer whose Run is under way, nil if none.
func (s *Store) runningWriter() *Writer {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.running
}

// journalOldest returns the oldest reading that the running Writer holds
// in its journal, math.MaxInt64 when there is none (or no Writer runs):
// what a seek through the stored keys (ReadingSpan, OldestReading) does
// not see. A Writer that is stopping checkpoints its journal last:
// journalOldest waits for that, and the seek then sees them.
func (s *Store) journalOldest() (int64, error) {
	w := s.runningWriter()
	if w == nil {
		return math.MaxInt64, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	oldest := int64(math.MaxInt64)
	err := w.do(ctx, func() error {
		for _, st := range w.ckpt.dirty { // the series with readings in the journal
			for _, smp := range st.unflushed {
				oldest = min(oldest, smp.TS)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrClosed):
		select {
		case <-w.stopped:
			return math.MaxInt64, nil
		case <-ctx.Done():
			return math.MaxInt64, fmt.Errorf("the oldest reading of the journal: %w", ctx.Err())
		}
	case err != nil:
		return math.MaxInt64, fmt.Errorf("the oldest reading of the journal: %w", err)
	}
	return oldest, nil
}

// replayJournal checkpoints the readings that a crash or a power cut left
// in the log after the checkpoint's cursor (and, in a store of version 4
// or older, in its journal): they were acknowledged, and are written as
// runs and records now. The reading count already holds them (it is
// written with each entry). An entry that cannot be read is logged and
// left (a journal entry: deleted).
func (s *Store) replayJournal() error {
	legacy, err := s.readEntries(encoding.KindJournal, 0)
	if err != nil {
		return err
	}
	if err := s.replayEntries(legacy, true); err != nil {
		return err
	}
	o := &s.outbox
	if !o.hasCkpt {
		// A store of version 4 or older: its journal is replayed, and
		// what its outbox holds was in the journal too.
		if err := s.update(func(txn *badger.Txn) error {
			return txn.Set(encoding.AppendMetaKey(nil, encoding.MetaCheckpoint), encoding.AppendUint64(nil, o.synced))
		}); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if !s.noSync {
			if err := s.db.Sync(); err != nil {
				return fmt.Errorf("journal: %w", err)
			}
		}
		o.ckpt, o.hasCkpt = o.synced, true
		if len(legacy) > 0 {
			s.log.Info("the journal of an older store is checkpointed; its log follows from here", "entries", len(legacy))
		}
		return nil
	}
	entries, err := s.readEntries(encoding.KindOutbox, o.ckpt)
	if err != nil {
		return err
	}
	return s.replayEntries(entries, false)
}

// logEntry is a journal or log entry read back by Open.
type logEntry struct{ key, value []byte }

// readEntries reads the entries of kind from the one holding from on.
func (s *Store) readEntries(kind encoding.KeyKind, from uint64) ([]logEntry, error) {
	var entries []logEntry
	err := s.db.View(func(txn *badger.Txn) error {
		start := []byte{byte(kind)}
		if kind == encoding.KindOutbox {
			start = encoding.AppendOutboxKey(nil, from)
			rit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kind)}, Reverse: true})
			if rit.Seek(start); rit.Valid() {
				start = rit.Item().KeyCopy(nil)
			}
			rit.Close()
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(kind)}})
		defer it.Close()
		for it.Seek(start); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			entries = append(entries, logEntry{it.Item().KeyCopy(nil), v})
		}
		return nil
	})
	return entries, err
}

// replayEntries checkpoints the readings of entries (of the journal if
// legacy, else of the log from the checkpoint's cursor on).
func (s *Store) replayEntries(entries []logEntry, legacy bool) error {
	if len(entries) == 0 {
		return nil
	}
	// An entry at a time, each with the checkpoint that writes its last
	// readings (and, for a journal entry, its delete). One too big for
	// the transactions of this memtable (a smaller one than it was
	// written with) is split: if a crash comes between the parts, the
	// readings already in runs are skipped the next time, their
	// aggregates with them. Each checkpoint is synced: db.Sync covers
	// only the memtable being written, so a part synced later would not
	// cover one before a memtable switch.
	w := NewWriter(s, WriterOptions{})
	w.ckpt.replaying = true
	w.journal.end = s.outbox.ckpt // moved entry by entry
	now := time.Now()
	var (
		d        encoding.OutboxDecoder
		readings []OutboxReading
		replayed int
	)
	part := func() {
		w.journaled(false, nil)
		for _, st := range w.touched {
			st.touched = false
		}
		w.touched = w.touched[:0]
	}
	const deleteSize = encoding.JournalKeyLen + 2
	for _, e := range entries {
		seq := binary.BigEndian.Uint64(e.key[1:])
		readings = readings[:0]
		err := d.Decode(seq, e.value, func(r OutboxReading) bool {
			readings = append(readings, r)
			return true
		})
		if err != nil {
			s.log.Error("log entry unreadable: its readings are not in the store", "key", fmt.Sprintf("%x", e.key), "err", err)
			readings = readings[:0]
		}
		end := seq
		if err != nil && !legacy {
			// Past it, to where the next entry starts; the newest one
			// ends where it began (Open deletes it, dropBadNewest, and
			// the next reading is numbered from there).
			end = min(s.corruptEntryEnd(seq, s.outbox.synced), s.outbox.synced)
		}
		if legacy {
			w.ckpt.budget.takeSize(deleteSize)
		}
		for _, r := range readings {
			end = r.Seq + 1
			if !legacy && r.Seq < s.outbox.ckpt {
				continue
			}
			st, _, _ := w.state(r.Device, r.Metric, now) // no limits: these readings were acknowledged
			smp := Sample{TS: r.TS, Value: r.Value}
			if r.Text != "" {
				var ok bool
				if smp, ok = s.replayText(st, &r.Reading); !ok {
					s.log.Error("a text reading of the log has no id in its series' dictionary: not in the store", "device", r.Device, "metric", r.Metric, "text", r.Text, "seq", r.Seq)
					continue
				}
			}
			if st.hasOpen(smp) {
				continue
			}
			if !w.reserveReading(&w.ckpt.budget, st, r.TS, r.Text != "") {
				part()
				if err := w.checkpoint(); err != nil {
					return fmt.Errorf("journal: %w", err)
				}
				if legacy {
					w.ckpt.budget.takeSize(deleteSize)
				}
				w.reserveReading(&w.ckpt.budget, st, r.TS, r.Text != "")
			}
			w.hold(st, smp, r.Text != "")
			replayed++
		}
		part()
		if legacy {
			w.journal.legacy = append(w.journal.legacy, e.key)
		} else {
			w.journal.end, w.journal.parts = max(end, s.outbox.ckpt), 1
		}
		if err := w.checkpoint(); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	s.log.Info("wrote the readings a stop left in the log", "entries", len(entries), "readings", replayed)
	return nil
}
