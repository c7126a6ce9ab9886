package buffer

import (
	"errors"
	"fmt"
	"io"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The pre-aggregates of a series: one _stats record per minute, hour and
// day that holds readings, written by the checkpoint that writes the
// readings' runs, in the same transaction, so that the two never disagree,
// even after a crash (journal.go). A reading recognised as a duplicate
// changes no record.

// levels returns the levels every reading updates.
func levels() [3]aggregate.Level {
	return allLevels
}

// allLevels is what levels returns, for statsLevels's slices of it; no one
// changes it.
var allLevels = [3]aggregate.Level{aggregate.Minute, aggregate.Hour, aggregate.Day}

// statKey names a record touched by the commit under way.
type statKey struct {
	level aggregate.Level
	st    *seriesState
	start int64
}

// statsEntrySize is what a record costs a transaction beyond its key: its
// 41-byte encoding and Badger's two metadata bytes.
const statsEntrySize = 41 + 2

// statsLevels returns the levels whose records a reading of st at ts
// updates in its commit: its minute always; its hour and day only when they
// were rolled up already (a late reading), since rolling up computes them
// from the minutes later otherwise.
func statsLevels(st *seriesState, ts int64) []aggregate.Level {
	all := allLevels[:] // a slice of a local array would be allocated, twice a reading
	switch {
	case aggregate.Day.Truncate(ts) < st.rolled[rolledDays]:
		return all[:3:3]
	case aggregate.Hour.Truncate(ts) < st.rolled[rolledHours]:
		return all[:2:2]
	}
	return all[:1:1] // an append must not write to allLevels
}

// Indexes of seriesIndex.rolled.
const (
	rolledHours = 0
	rolledDays  = 1
)

// reserveStats takes from b the records that a reading of st at ts, a
// text reading if text, would add to the commit part, and reports whether
// they fit.
func (w *Writer) reserveStats(b *txnBudget, st *seriesState, ts int64, text bool) bool {
	if text {
		return w.reserveStates(b, st, ts)
	}
	keyLen := 1 + len(st.device) + 1 + len(st.metric) + 1 + 8
	for _, l := range statsLevels(st, ts) {
		k := statKey{l, st, l.Truncate(ts)}
		if _, ok := w.deltas[k]; ok {
			continue
		}
		if _, ok := w.ckpt.deltas[k]; ok {
			continue
		}
		if !b.takeSize(int64(keyLen) + statsEntrySize) {
			return false
		}
	}
	return true
}

// addStats adds a stored number reading to the aggregates of the commit
// part. A text reading adds nothing here (hold, text.go): a sum of its
// ids would mean nothing.
func (w *Writer) addStats(st *seriesState, ts int64, v float64) {
	for _, l := range statsLevels(st, ts) {
		k := statKey{l, st, l.Truncate(ts)}
		d := w.deltas[k]
		d.Add(v)
		w.deltas[k] = d
	}
}

// writeStats merges the aggregates of the journal into their records. The
// newest record of each level of a series is kept in memory once committed
// (see statsCommitted), so that readings in time order cost no lookup.
func (w *Writer) writeStats(txn *badger.Txn) error {
	w.written = w.written[:0]
	for k, d := range w.ckpt.deltas {
		key := encoding.AppendStatsKey(nil, k.level, k.st.device, k.st.metric, k.start)
		var cur aggregate.Stats
		if c := &k.st.stats[k.level-aggregate.Minute]; c.Start == k.start && !c.Stats.IsEmpty() {
			cur = c.Stats
		} else {
			var err error
			cur, err = getStats(txn, key)
			if errors.Is(err, aggregate.ErrBadStats) || errors.Is(err, io.ErrUnexpectedEOF) {
				// A record that cannot be read must not stop every
				// checkpoint after it: it starts again from this delta.
				w.store.log.Error("minute record unreadable: written again from the readings of this checkpoint", "key", fmt.Sprintf("%q", key), "err", err)
				cur, err = aggregate.Stats{}, nil
			}
			if err != nil {
				return err
			}
		}
		cur.Merge(d)
		if err := txn.Set(key, cur.Append(nil)); err != nil {
			return err
		}
		w.written = append(w.written, writtenStats{k, cur})
	}
	return nil
}

// writtenStats is a record written by the commit part under way.
type writtenStats struct {
	key   statKey
	stats aggregate.Stats
}

// statsCommitted keeps the records of the committed part in memory where
// they are the newest of their level.
func (w *Writer) statsCommitted() {
	for _, r := range w.written {
		if c := &r.key.st.stats[r.key.level-aggregate.Minute]; r.key.start >= c.Start || c.Stats.IsEmpty() {
			*c = StatsAt{Start: r.key.start, Stats: r.stats}
		}
	}
	w.written = w.written[:0]
}

// getStats reads the record under key; a missing one is empty.
func getStats(txn *badger.Txn, key []byte) (aggregate.Stats, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return aggregate.Stats{}, nil
	}
	if err != nil {
		return aggregate.Stats{}, err
	}
	var st aggregate.Stats
	err = item.Value(func(v []byte) (err error) {
		st, err = aggregate.Decode(v)
		return err
	})
	if err != nil {
		return aggregate.Stats{}, fmt.Errorf("stats %q: %w", key, err)
	}
	return st, nil
}
