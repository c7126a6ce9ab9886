package buffer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// An upstream that comes back after an outage may catch up live first:
// its newest readings go ahead of the backlog. Its cursor then holds two
// places in the log:
//
//	Cursor … Mark   the backlog, sent oldest first from Cursor
//	Mark … Live     sent already, ahead of the backlog
//	Live … End      the live stream, sent from Live as readings come
//
// writeLive stores m as c's value, synced if sync, and makes its live
// stream c's (o.write held).
func (c *Cursor) writeLive(m encoding.CursorMeta, sync bool) error {
	if err := c.write(m, sync); err != nil {
		return err
	}
	o := &c.s.outbox
	o.mu.Lock()
	c.setLive(m)
	o.mu.Unlock()
	return nil
}

// AimLive starts the live stream at Mark; SetLiveBatch and AdvanceLive
// are the live stream's SetOutboxBatch and AdvanceOutbox, and record the
// same way: a live batch is synced before it is sent, and a restart sends
// it again under the same id. Both places, and a batch of each, are the
// one stored value of the cursor (encoding.CursorMeta), so a restart
// resends at most the batch that was in flight. When the backlog reaches
// Mark the two merge: the cursor goes on from Live. Entries are deleted
// only behind Cursor, so those from Mark to Live stay until then.
//
// An upstream can also be held to a backlog it may keep (TrimBacklog):
// its oldest unsent readings beyond that are dropped from its cursor
// only, counted and logged.

// ErrNoLiveStream is returned by SetLiveBatch when the cursor has no live
// stream (the backlog reached its mark meanwhile, or was dropped past it).
var ErrNoLiveStream = errors.New("log: the upstream has no live stream")

// CatchingUp reports whether the upstream sends a live stream ahead of its
// backlog.
func (o OutboxState) CatchingUp() bool { return o.Live != 0 }

// merged returns m with its live stream ended once the backlog has reached
// the mark: the cursor goes on from the live stream's place, and a live
// batch being sent becomes the cursor's batch.
func merged(m encoding.CursorMeta) encoding.CursorMeta {
	if m.Live == 0 || m.Cursor < m.Mark {
		return m
	}
	if m.Cursor < m.Live {
		m.Cursor = m.Live
		m.OutboxMeta = encoding.OutboxMeta{Cursor: m.Live, BatchStart: m.Live}
		if m.LiveBatchEnd > m.Live {
			m.BatchEnd, m.BatchNote = m.LiveBatchEnd, m.LiveBatchNote
		}
	}
	m.Mark, m.Live, m.LiveBatchEnd, m.LiveBatchNote = 0, 0, 0, 0
	return m
}

// setLive copies m's live stream into c's state (outbox.mu held).
func (c *Cursor) setLive(m encoding.CursorMeta) {
	c.state.Mark, c.state.Live = m.Mark, m.Live
	c.state.LiveBatchEnd, c.state.LiveBatchNote = m.LiveBatchEnd, m.LiveBatchNote
}

// droppedTo returns c's stored value once the readings before to are
// dropped, with those it had not sent counted (outbox.mu held).
func (c *Cursor) droppedTo(to uint64) encoding.CursorMeta {
	m := c.meta()
	unsent := to - m.Cursor
	if m.Live != 0 && to > m.Mark {
		unsent -= min(to, m.Live) - m.Mark // sent ahead of the backlog
	}
	m.Dropped += unsent
	m.OutboxMeta = encoding.OutboxMeta{Cursor: to, BatchStart: to}
	return merged(m)
}

// dropped makes m, from droppedTo, c's state; batchStart stays but where
// a live batch became the cursor's (outbox.mu held).
func (c *Cursor) dropped(m encoding.CursorMeta) {
	c.state.Cursor, c.state.BatchEnd, c.state.BatchNote, c.state.Dropped = m.Cursor, m.BatchEnd, m.BatchNote, m.Dropped
	if m.BatchEnd > m.Cursor {
		c.batchStart = m.BatchStart
	}
	c.setLive(m)
}

// write stores m as c's value, synced if sync (o.write held).
func (c *Cursor) write(m encoding.CursorMeta, sync bool) error {
	s := c.s
	s.syncMu.Lock() // must not come between a commit and its sync
	defer s.syncMu.Unlock()
	if err := s.update(func(txn *badger.Txn) error { return c.setMeta(txn, m) }); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if sync && !s.noSync {
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("log: sync: %w", err)
		}
	}
	return nil
}

// AimLive starts the live stream at mark, durably: the readings from the
// cursor to mark become the backlog, sent after those from mark on. A live
// stream that has not had a reading accepted yet moves to mark, and its
// batch, which the upstream did not take, is forgotten (its readings join
// the backlog). AimLive does nothing when mark is not past the cursor and
// its batch, or beyond the log's end, or the live stream has had readings
// accepted already.
func (c *Cursor) AimLive(mark uint64) error {
	o := &c.s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	m, end := c.meta(), o.synced
	o.mu.Unlock()
	floor := m.Cursor + 1
	if m.BatchStart == m.Cursor {
		floor = max(floor, m.BatchEnd)
	}
	if mark < floor || mark > end || m.Live != m.Mark || (m.Live == mark && m.LiveBatchEnd == 0) {
		return nil
	}
	m.Mark, m.Live, m.LiveBatchEnd, m.LiveBatchNote = mark, mark, 0, 0
	return c.writeLive(m, true)
}

// SetLiveBatch is SetOutboxBatch for the live stream: it records, durably,
// that readings from Live up to end are being sent as one batch. It
// returns ErrNoLiveStream when there is none.
func (c *Cursor) SetLiveBatch(end uint64, note int64) error {
	o := &c.s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	m := c.meta()
	o.mu.Unlock()
	if m.Live == 0 {
		return ErrNoLiveStream
	}
	m.LiveBatchEnd, m.LiveBatchNote = end, note
	return c.writeLive(m, true)
}

// AdvanceLive is AdvanceOutbox for the live stream: it moves Live to to
// (never back), not synced. When the live stream merged with the backlog
// meanwhile, it moves the cursor, if to is past it.
func (c *Cursor) AdvanceLive(to uint64) error {
	o := &c.s.outbox
	o.write.Lock()
	o.mu.Lock()
	m, end := c.meta(), o.synced
	o.mu.Unlock()
	if m.Live == 0 {
		o.write.Unlock()
		if to > m.Cursor {
			return c.AdvanceOutbox(to)
		}
		return nil
	}
	defer o.write.Unlock()
	if to > end {
		return fmt.Errorf("log: live cursor %d is past the end %d", to, end)
	}
	m.Live, m.LiveBatchEnd, m.LiveBatchNote = max(to, m.Live), 0, 0
	return c.writeLive(m, false)
}

// BacklogLimit is how much one upstream may hold back in the log.
type BacklogLimit struct {
	// MaxAge: readings stamped more than this before the gateway's clock
	// are dropped, from the oldest unsent on, up to the first younger one
	// (0: no limit).
	MaxAge time.Duration
	// MaxBytes: the log entries from the upstream's oldest unsent reading
	// to the end, as stored (compressed), are kept to this many bytes by
	// dropping whole entries from the oldest on (0: no limit).
	MaxBytes int64
}

// TrimBacklog drops the oldest readings of c's backlog beyond lim, as
// Drop does, and returns what it dropped (none: To == From).
func (c *Cursor) TrimBacklog(lim BacklogLimit, now time.Time) (OutboxDrop, error) {
	var total OutboxDrop
	if lim.MaxAge > 0 {
		cutoff := now.Add(-lim.MaxAge).UnixNano()
		d, err := c.drop(math.MaxUint64, func(r OutboxReading) bool { return r.TS < cutoff }, "max_backlog", lim.MaxAge.String())
		if err != nil {
			return total, err
		}
		total = d
	}
	if lim.MaxBytes > 0 {
		n, err := c.overBytes(lim.MaxBytes)
		if err != nil || n == 0 {
			return total, err
		}
		d, err := c.drop(n, nil, "max_backlog_bytes", lim.MaxBytes)
		if err != nil {
			return total, err
		}
		if total.To == total.From {
			return d, nil
		}
		total.To = d.To
		total.OldestTS, total.NewestTS = min(total.OldestTS, d.OldestTS), max(total.NewestTS, d.NewestTS)
	}
	return total, nil
}

// overBytes returns how many of c's oldest unsent readings must go for
// the log entries from its cursor on to take at most limit bytes: up to
// the start of the first entry from which on they do.
func (c *Cursor) overBytes(limit int64) (uint64, error) {
	o := &c.s.outbox
	o.mu.Lock()
	cur, end := c.state.Cursor, o.synced
	o.mu.Unlock()
	type entry struct {
		seq  uint64
		size int64
	}
	var entries []entry
	var total int64
	err := c.s.db.View(func(txn *badger.Txn) error {
		it := logFrom(txn, cur)
		defer it.Close()
		for ; it.Valid(); it.Next() {
			seq := binary.BigEndian.Uint64(it.Item().Key()[1:])
			if seq >= end {
				break
			}
			entries = append(entries, entry{seq, it.Item().EstimatedSize()})
			total += entries[len(entries)-1].size
		}
		return nil
	})
	if err != nil || total <= limit {
		return 0, err
	}
	for _, e := range entries {
		if total <= limit {
			return e.seq - cur, nil
		}
		total -= e.size
	}
	return end - cur, nil
}

// Drop moves c past its oldest n unsent readings (or all of its backlog,
// if fewer), whatever the other upstreams do: they are counted in
// OutboxState.Dropped, logged, and the log entries no cursor needs any
// more are deleted. A batch being sent meanwhile is sent all the same;
// see AdvanceOutbox. While c catches up live first, only its backlog is
// dropped, up to the mark.
func (c *Cursor) Drop(n uint64) (OutboxDrop, error) {
	return c.drop(n, nil, "readings", n)
}

// drop drops at most n of c's oldest unsent readings, up to the first that
// old (when not nil) does not hold for, and logs it with the reason why.
func (c *Cursor) drop(n uint64, old func(OutboxReading) bool, why ...any) (OutboxDrop, error) {
	s, o := c.s, &c.s.outbox
	o.write.Lock()
	defer o.write.Unlock()
	o.mu.Lock()
	from, stop := c.state.Cursor, o.synced
	if c.state.Live != 0 {
		stop = c.state.Mark
	}
	o.mu.Unlock()
	d := OutboxDrop{From: from, To: from, OldestTS: math.MaxInt64, NewestTS: math.MinInt64}
	if n == 0 || from >= stop {
		return d, nil
	}
	var bad error
	err := s.scanLog(from, stop, func(r OutboxReading) bool {
		if d.To-d.From >= n || (old != nil && !old(r)) {
			return false
		}
		d.OldestTS, d.NewestTS = min(d.OldestTS, r.TS), max(d.NewestTS, r.TS)
		d.To = r.Seq + 1
		return true
	})
	if ce, ok := errors.AsType[*CorruptOutboxError](err); ok && old == nil {
		// An entry that cannot be read is dropped by its range.
		d.To, bad = min(ce.To, stop, d.From+n), err
	} else if ok {
		// Its readings' ages are unknown: the uplink parks it when it
		// comes to it.
	} else if err != nil {
		return OutboxDrop{}, fmt.Errorf("log: drop: %w", err)
	}
	if d.To == d.From {
		return d, nil
	}
	var m encoding.CursorMeta
	var low uint64
	s.syncMu.Lock()
	err = s.update(func(txn *badger.Txn) error {
		o.mu.Lock()
		m = c.droppedTo(d.To)
		hold := min(m.Cursor, o.ckpt)
		for _, other := range o.cursors {
			if other != c {
				hold = min(hold, other.state.Cursor)
			}
		}
		o.mu.Unlock()
		if err := c.setMeta(txn, m); err != nil {
			return err
		}
		budget := newTxnBudget(s.db, metaEntrySize+48)
		var err error
		low, err = s.trimLog(txn, &budget, hold)
		return err
	})
	// Synced: the entries are gone, and a cursor that a power cut moved
	// back would find them gone uncounted; another cursor's trim may
	// delete them too.
	if err == nil && !s.noSync {
		err = s.db.Sync()
	}
	s.syncMu.Unlock()
	if err != nil {
		return OutboxDrop{}, fmt.Errorf("log: drop: %w", err)
	}
	o.mu.Lock()
	c.dropped(m)
	o.low = max(o.low, low)
	o.mu.Unlock()
	attrs := []any{"upstream", c.name, "readings", d.Readings(), "first_seq", d.From}
	if d.OldestTS <= d.NewestTS {
		attrs = append(attrs, "oldest", time.Unix(0, d.OldestTS).UTC(), "newest", time.Unix(0, d.NewestTS).UTC())
	}
	if bad != nil {
		attrs = append(attrs, "unreadable", bad)
	}
	s.log.Warn("dropped the oldest readings the upstream had not sent", append(attrs, why...)...)
	return d, nil
}

// logFrom returns an iterator over the log's entries from the one that
// holds seq: the last that starts at seq or before it.
func logFrom(txn *badger.Txn, seq uint64) *badger.Iterator {
	start := encoding.AppendOutboxKey(nil, seq)
	rit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}, Reverse: true})
	if rit.Seek(start); rit.Valid() {
		start = rit.Item().KeyCopy(nil)
	}
	rit.Close()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindOutbox)}})
	it.Seek(start)
	return it
}

// scanLog calls fn with the readings from from to stop-1 in order, until
// it returns false. An entry that cannot be decoded ends the scan with a
// *CorruptOutboxError.
func (s *Store) scanLog(from, stop uint64, fn func(OutboxReading) bool) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := logFrom(txn, from)
		defer it.Close()
		var dec encoding.OutboxDecoder
		more := true
		for ; it.Valid() && more; it.Next() {
			seq := binary.BigEndian.Uint64(it.Item().Key()[1:])
			if seq >= stop {
				break
			}
			var bad error
			err := it.Item().Value(func(v []byte) error {
				bad = dec.Decode(seq, v, func(r OutboxReading) bool {
					if r.Seq >= stop {
						more = false
					} else if r.Seq >= from {
						more = fn(r)
					}
					return more
				})
				return nil
			})
			if err != nil {
				return fmt.Errorf("log entry %d: %w", seq, err)
			}
			if bad != nil {
				return &CorruptOutboxError{From: max(from, seq), To: s.corruptEntryEnd(seq, stop), Entry: seq, Err: bad}
			}
		}
		return nil
	})
}
