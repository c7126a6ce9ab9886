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

// journalNext returns the number after the newest journal entry's (0 when
// there is none): a Writer numbers its entries from it.
func (s *Store) journalNext() uint64 {
	var next uint64
	s.db.View(func(txn *badger.Txn) error {
		prefix := []byte{byte(encoding.KindJournal)}
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: prefix})
		defer it.Close()
		it.Seek(encoding.AppendJournalKey(nil, math.MaxUint64))
		if it.Valid() && len(it.Item().Key()) == encoding.JournalKeyLen {
			next = binary.BigEndian.Uint64(it.Item().Key()[1:]) + 1
		}
		return nil
	})
	return next
}

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

// replayJournal checkpoints the entries that a crash or a power cut left
// in the journal: their readings were acknowledged, and are written as
// runs and records now. The reading count already holds them (it is
// written with each entry). An entry that cannot be read is logged and
// deleted.
func (s *Store) replayJournal() error {
	type entry struct{ key, value []byte }
	var entries []entry
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindJournal)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			entries = append(entries, entry{it.Item().KeyCopy(nil), v})
		}
		return nil
	})
	if err != nil || len(entries) == 0 {
		return err
	}
	// An entry at a time, each with its delete in the checkpoint that
	// writes its last readings. One too big for the transactions of this
	// memtable (a smaller one than it was written with) is split: if a
	// crash comes between the parts, the readings already in runs are
	// skipped the next time, their aggregates with them. Each checkpoint
	// is synced: db.Sync covers only the memtable being written, so a
	// part synced later would not cover one before a memtable switch.
	w := NewWriter(s, WriterOptions{})
	w.ckpt.replaying = true
	now := time.Now()
	var (
		d        encoding.OutboxDecoder
		readings []Reading
		replayed int
	)
	part := func() {
		w.journaled(nil, nil)
		for _, st := range w.touched {
			st.touched = false
		}
		w.touched = w.touched[:0]
	}
	for _, e := range entries {
		readings = readings[:0]
		err := d.Decode(0, e.value, func(r OutboxReading) bool {
			readings = append(readings, r.Reading)
			return true
		})
		if err != nil {
			s.log.Error("journal entry unreadable: its readings are not in the store", "key", fmt.Sprintf("%x", e.key), "err", err)
			readings = readings[:0]
		}
		w.ckpt.budget.takeSize(encoding.JournalKeyLen + 2)
		for _, r := range readings {
			st, _, _ := w.state(r.Device, r.Metric, now) // no limits: these readings were acknowledged
			smp := Sample{TS: r.TS, Value: r.Value}
			if st.hasOpen(smp) {
				continue
			}
			if !w.reserveReading(&w.ckpt.budget, st, r.TS) {
				part()
				if err := w.checkpoint(); err != nil {
					return fmt.Errorf("journal: %w", err)
				}
				w.ckpt.budget.takeSize(encoding.JournalKeyLen + 2)
				w.reserveReading(&w.ckpt.budget, st, r.TS)
			}
			w.hold(st, smp)
			replayed++
		}
		part()
		w.journal.keys = append(w.journal.keys, e.key)
		if err := w.checkpoint(); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	s.log.Info("wrote the readings a stop left in the journal", "entries", len(entries), "readings", replayed)
	return nil
}
