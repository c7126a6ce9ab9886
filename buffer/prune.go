package buffer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/cairn-gateway/cairn/aggregate"
)

// pruneEvery is how often the Writer prunes aggregate records.
const pruneEvery = time.Hour

// ErrClockBehind is returned by Prune while the clock is before the
// newest reading stored: a board without a real-time clock boots with a
// wrong date until NTP sets it, and pruning by that date would be wrong.
var ErrClockBehind = errors.New("clock is before the newest reading stored: retention paused")

// prune applies retention at now: raw readings first, then aggregates.
// Used by the Run goroutine only.
func (w *Writer) prune(now time.Time) error {
	if w.opts.RawMaxAge <= 0 && len(w.opts.StatsMaxAge) == 0 {
		return nil
	}
	newest := int64(math.MinInt64)
	for _, st := range w.store.series { // only this goroutine writes the map
		newest = max(newest, st.last)
	}
	if now.UnixNano() < newest {
		return fmt.Errorf("%w (clock %s, newest reading %s)", ErrClockBehind, now.UTC().Format(time.RFC3339), time.Unix(0, newest).UTC().Format(time.RFC3339))
	}
	if err := w.pruneRaw(now); err != nil {
		return err
	}
	return w.pruneStats(now)
}

// pruneRaw deletes the readings of the whole UTC days that ended
// RawMaxAge or more before now: their sealed buckets (a series-day is a key
// prefix) and any open points, and takes them off the reading count in the
// same transactions.
func (w *Writer) pruneRaw(now time.Time) error {
	if w.opts.RawMaxAge <= 0 {
		return nil
	}
	cutDay := dayOf(now.Add(-w.opts.RawMaxAge).UnixNano()) // days before it go
	snap := w.store.db.NewTransaction(false)
	defer snap.Discard()
	var dels []counted
	var opened []*seriesState
	for _, st := range w.store.series {
		prefix := appendBucketPrefix(nil, st.device, st.metric)
		it := snap.NewIterator(badger.IteratorOptions{Prefix: prefix})
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			first, err := parseBucketTail(item.Key())
			if err != nil {
				it.Close()
				return err
			}
			if dayOf(first.TS) >= cutDay {
				break
			}
			var h bucketHeader
			if err := item.Value(func(v []byte) (err error) { h, err = parseBucketHeader(v); return err }); err != nil {
				it.Close()
				return fmt.Errorf("bucket %q: %w", item.Key(), err)
			}
			dels = append(dels, counted{item.KeyCopy(nil), h.Count})
		}
		it.Close()
		for day, open := range st.open {
			if day >= cutDay {
				continue
			}
			for _, p := range open {
				dels = append(dels, counted{appendPointKey(nil, Reading{Device: st.device, Metric: st.metric, TS: p.TS, Value: p.Value}), 1})
			}
			opened = append(opened, st)
		}
	}
	if err := w.deleteCounted(dels); err != nil {
		return err
	}
	for _, st := range opened {
		for day := range st.open {
			if day < cutDay {
				delete(st.open, day)
			}
		}
	}
	return nil
}

// counted is a key to delete and the readings it holds.
type counted struct {
	key      []byte
	readings int
}

// deleteCounted deletes keys holding readings, in as few transactions as
// Badger takes, each with the reading count brought down by what it
// deletes.
func (w *Writer) deleteCounted(dels []counted) error {
	s := w.store
	for len(dels) > 0 {
		txn := s.db.NewTransaction(true)
		budget := newTxnBudget(s.db, metaEntrySize)
		n, gone := 0, uint64(0)
		for ; n < len(dels) && budget.take(dels[n].key, nil); n++ {
			if err := txn.Delete(dels[n].key); err != nil {
				txn.Discard()
				return err
			}
			gone += uint64(dels[n].readings)
		}
		s.mu.RLock()
		total := s.readings - min(gone, s.readings)
		s.mu.RUnlock()
		if err := txn.Set(appendMetaKey(nil, metaReadings), appendUint64(nil, total)); err != nil {
			txn.Discard()
			return err
		}
		if err := txn.Commit(); err != nil {
			txn.Discard()
			return err
		}
		s.mu.Lock()
		s.readings = total
		s.mu.Unlock()
		w.prunedReadings.Add(gone)
		dels = dels[n:]
	}
	return nil
}

// pruneStats deletes the aggregate records that started before their
// level's retention at now.
func (w *Writer) pruneStats(now time.Time) error {
	if len(w.opts.StatsMaxAge) == 0 {
		return nil
	}
	snap := w.store.db.NewTransaction(false)
	defer snap.Discard()
	var keys [][]byte
	for _, st := range w.store.series {
		for _, l := range levels() {
			age := w.opts.StatsMaxAge[l]
			if age <= 0 {
				continue
			}
			cutoff := now.Add(-age).UnixNano()
			// Never delete what the next level is still to be rolled up
			// from.
			switch l {
			case aggregate.Minute:
				cutoff = min(cutoff, st.rolled[rolledHours])
			case aggregate.Hour:
				cutoff = min(cutoff, st.rolled[rolledDays])
			}
			if c := &st.stats[l-aggregate.Minute]; c.Start < cutoff {
				*c = StatsAt{} // about to be deleted: forget it
			}
			prefix := appendStatsPrefix(nil, l, st.device, st.metric)
			it := snap.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				if len(k) != len(prefix)+8 || decodeTS(k[len(prefix):]) >= cutoff {
					break
				}
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
	}
	return w.deleteKeys(keys)
}

// deleteKeys deletes keys in as few transactions as Badger takes.
func (w *Writer) deleteKeys(keys [][]byte) error {
	for len(keys) > 0 {
		txn := w.store.db.NewTransaction(true)
		budget := newTxnBudget(w.store.db, 0)
		n := 0
		for ; n < len(keys) && budget.take(keys[n], nil); n++ {
			if err := txn.Delete(keys[n]); err != nil {
				txn.Discard()
				return err
			}
		}
		if err := txn.Commit(); err != nil {
			txn.Discard()
			return err
		}
		w.pruned.Add(uint64(n))
		keys = keys[n:]
	}
	return nil
}
