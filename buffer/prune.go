package buffer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Pruning deletes with transactions (tombstones), never with Badger's
// DropPrefix: a transaction keeps the reading count exact (the count goes
// down in the transaction that deletes), and it does not block other
// writes, while DropPrefix makes every concurrent write fail
// (ErrBlockedWrites). Space comes back when compaction rewrites the tables
// (Store.compact). Every delete runs on the Writer's goroutine, in steps of
// at most pruneChunkKeys keys between group commits, so that a big prune
// holds up ingest for one step at a time, never for the whole prune.

// pruneChunkKeys bounds the keys one retention step deletes.
const pruneChunkKeys = 4096

// ErrClockBehind is returned by Prune while WriterOptions.Clock says the
// clock cannot be trusted (clock.go), and while it is more than RawMaxAge
// ahead of the newest reading: every raw reading would go, which a clock
// set far forward would do as surely as a long silence of every sensor;
// the last readings are kept until new ones come.
var ErrClockBehind = errors.New("retention paused")

// checkClock returns an ErrClockBehind error, saying why, when now cannot
// be trusted. Used by the Run goroutine only.
func (w *Writer) checkClock(now time.Time) error {
	return w.checkClockAt(now, w.store.newestReading())
}

// checkClockAt is checkClock with the newest reading given.
func (w *Writer) checkClockAt(now time.Time, newest int64) error {
	if c := w.opts.Clock; c != nil {
		if ok, why := c.Check(); !ok {
			return fmt.Errorf("%w: the clock is not trusted; %s; it reads %s", ErrClockBehind, why, now.UTC().Format(time.RFC3339))
		}
	}
	if age := w.policy.RawMaxAge; age > 0 && newest != math.MinInt64 && now.Sub(time.Unix(0, newest)) > age {
		return fmt.Errorf("%w: the clock is more than raw_max_age (%s) ahead of the newest reading stored (%s): set far forward, or no reading came for that long; it reads %s",
			ErrClockBehind, age, time.Unix(0, newest).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// ageCut returns the time before which a policy keeping readings for age
// deletes at now: now less age, or the start of a span of readings
// stamped by an untrusted clock that it must still keep.
func (w *Writer) ageCut(now time.Time, age time.Duration) int64 {
	cut := now.Add(-age).UnixNano()
	if c := w.opts.Clock; c != nil {
		if from, ok := c.Protected(now, age); ok {
			cut = min(cut, from)
		}
	}
	return cut
}

// Prune has the running Writer apply retention by age at now: raw
// readings older than the policy's RawMaxAge and aggregate records older
// than their StatsMaxAge. It deletes in steps of a few thousand keys, and group
// commits go on between them. It returns an ErrClockBehind error, and
// deletes nothing by age, while now cannot be trusted (checkClock: the
// Clock does not trust it, or it is far ahead of the newest reading);
// the policies that do not go by the clock still apply.
//
// While readings come in, Prune rests after each step for pruneRest times
// as long as the step took, so that ingest keeps nearly all of the Writer:
// a prune of weeks of data takes longer, and a commit waits for one step
// at most. With no readings coming in it goes at full speed.
func (w *Writer) Prune(ctx context.Context, now time.Time) error {
	commits := w.commits.Load()
	var cur pruneCursor
	for {
		var more, full bool
		var took time.Duration
		err := w.doCheckpointed(ctx, func() (err error) {
			t0 := time.Now()
			more, err = w.pruneStep(now, &cur)
			took = time.Since(t0)
			w.pruneBusy.Add(int64(took))
			full = w.paused()
			return err
		})
		if err != nil || !more {
			return err
		}
		// Readings come in if commits were made since the last rest, or
		// wait in the queue, unless the Writer takes none (the disk is
		// full): then the prune is what makes room, and goes at once.
		if full || w.commits.Load() == commits && len(w.queue) == 0 {
			continue
		}
		t := time.NewTimer(min(pruneRest*took, maxPruneRest))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		commits = w.commits.Load()
	}
}

// pruneRest is how many times as long as a step Prune rests after it
// while readings come in, and maxPruneRest the longest rest. A step costs
// ingest more than the time it holds the Writer: its tombstones go to the
// write-ahead log that the next commit syncs, and to compaction: the
// cost follows the readings deleted a second. With the embedded broker at
// full speed on one core (scripts/bench.sh embedded_pruning), ingest while
// a prune of weeks ran kept 0.83 of its rate with rests of 10 times the
// step (7.0 M sealed readings deleted a second), and all of it, within
// the measurement's noise, with 100 (1.5 M a second, still far more than
// ingest stores).
const (
	pruneRest    = 100
	maxPruneRest = time.Second
)

// pruneStep deletes up to pruneChunkKeys keys that retention removes at
// now, and reports whether more may remain. The policies that do not go
// by the clock (RawMaxReadingsPerSeries, RawWindowFromLatest) apply even
// while the clock pauses the others.
func (w *Writer) pruneStep(now time.Time, cur *pruneCursor) (more bool, err error) {
	o := w.policy
	if !o.prunes() {
		return false, nil
	}
	if !cur.checked {
		cur.newest, cur.checked = w.store.newestReading(), true
	}
	// The policy in force now: a reload may have changed it.
	clockErr := w.checkClockAt(now, cur.newest)
	ageCut := int64(math.MinInt64)
	if o.RawMaxAge > 0 && clockErr == nil {
		ageCut = w.ageCut(now, o.RawMaxAge)
	}
	if ageCut != math.MinInt64 || o.RawMaxReadingsPerSeries > 0 || o.RawWindowFromLatest > 0 {
		more, err := w.pruneRaw(cur, func(snap *badger.Txn, st *seriesState) (int64, error) {
			cut := ageCut
			if o.RawWindowFromLatest > 0 && st.last != math.MinInt64 {
				cut = max(cut, st.last-int64(o.RawWindowFromLatest))
			}
			if o.RawMaxReadingsPerSeries > 0 {
				c, err := w.keepNewest(snap, st, o.RawMaxReadingsPerSeries)
				if err != nil {
					return 0, err
				}
				cut = max(cut, c)
			}
			return cut, nil
		}, pruneChunkKeys)
		if err != nil || more {
			return more, err
		}
	}
	if clockErr != nil {
		return false, clockErr
	}
	var cut [3]int64
	for i, l := range levels() {
		cut[i] = math.MinInt64
		if age := o.StatsMaxAge[l]; age > 0 {
			cut[i] = w.ageCut(now, age)
		}
	}
	return w.pruneStatsBefore(cut, pruneChunkKeys)
}

// keepNewest returns the timestamp of the n-th newest reading of a series
// (math.MinInt64 when it has n or fewer): deleting what is older keeps n
// readings, or a few more that share that timestamp.
func (w *Writer) keepNewest(snap *badger.Txn, st *seriesState, n int) (int64, error) {
	var open []int64
	for _, pts := range st.days() {
		for _, p := range pts {
			open = append(open, p.TS)
		}
	}
	slices.Sort(open)
	slices.Reverse(open)
	// Buckets newest first; open points merged in by time.
	prefix := encoding.AppendBucketPrefix(nil, st.device, st.metric)
	it := snap.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	left := n
	for it.Seek(append(prefix[:len(prefix):len(prefix)], 0xff)); it.Valid(); it.Next() {
		var h encoding.BucketHeader
		if err := it.Item().Value(func(v []byte) (err error) { h, err = encoding.ParseBucketHeader(v); return err }); err != nil {
			return 0, fmt.Errorf("bucket %q: %w", it.Item().Key(), err)
		}
		for len(open) > 0 && open[0] > h.Last {
			if left--; left == 0 {
				return open[0], nil
			}
			open = open[1:]
		}
		// A bucket that does not hold the n-th newest reading is counted
		// by its header, with the open points within its span.
		within := 0
		for within < len(open) && open[within] >= h.First {
			within++
		}
		if left > h.Count+within {
			left -= h.Count + within
			open = open[within:]
			continue
		}
		var samples []Sample
		if err := it.Item().Value(func(v []byte) (err error) { samples, err = encoding.DecodeBucket(nil, v); return err }); err != nil {
			return 0, fmt.Errorf("bucket %q: %w", it.Item().Key(), err)
		}
		for i := len(samples) - 1; i >= 0; i-- {
			for len(open) > 0 && open[0] > samples[i].TS {
				if left--; left == 0 {
					return open[0], nil
				}
				open = open[1:]
			}
			if left--; left == 0 {
				return samples[i].TS, nil
			}
		}
	}
	if left <= len(open) {
		return open[left-1], nil
	}
	return math.MinInt64, nil
}

// pruneRawBefore deletes the readings older than cutoff, at most about
// limit keys of them, and takes them off the reading count in the same
// transaction: the sealed buckets of whole older days (a series-day is a
// key prefix), the buckets of cutoff's day that end before it, the part
// before it of the one bucket that spans it (rewritten under the key of
// its new first reading), and open points. It reports whether it stopped
// at the limit.
func (w *Writer) pruneRawBefore(cur *pruneCursor, cutoff int64, limit int) (more bool, err error) {
	return w.pruneRaw(cur, func(*badger.Txn, *seriesState) (int64, error) { return cutoff, nil }, limit)
}

// pruneCursor is where the next step of a pass over every series goes on:
// the series in a fixed order, the one it is at, and the key to seek in
// it. Without it every step would begin again at the first series and
// step over the tombstones of all that the steps before deleted; in a
// store of gigabytes that made a prune of weeks take minutes.
type pruneCursor struct {
	// newest is the newest reading when the pass began: every step
	// checks the clock against it, not against the readings that arrive
	// while the pass runs, which may be newer than its clock.
	newest  int64
	checked bool

	order []*seriesState // the series when the pass began, by id
	next  int            // the series the next step starts at
	seek  []byte         // where in it; nil: at its first bucket
}

// begin fixes the order of the pass at its first step. Series created
// later are newer than anything the pass deletes.
func (c *pruneCursor) begin(series map[string]*seriesState) {
	if c.order != nil {
		return
	}
	c.order = make([]*seriesState, 0, len(series))
	for _, id := range slices.Sorted(maps.Keys(series)) {
		c.order = append(c.order, series[id])
	}
}

// pruneRaw is pruneRawBefore with a cutoff per series (math.MinInt64:
// none), going on from cur.
func (w *Writer) pruneRaw(cur *pruneCursor, cutoffOf func(snap *badger.Txn, st *seriesState) (int64, error), limit int) (more bool, err error) {
	snap := w.store.db.NewTransaction(false)
	defer snap.Discard()
	var dels []counted
	var edits []openEdit
	cur.begin(w.store.series) // only this goroutine writes the map
	for ; cur.next < len(cur.order); cur.next, cur.seek = cur.next+1, nil {
		if len(dels) >= limit {
			more = true
			break
		}
		st := cur.order[cur.next]
		cutoff, err := cutoffOf(snap, st)
		if err != nil {
			return false, err
		}
		if cutoff == math.MinInt64 {
			continue
		}
		cutDay := encoding.DayOf(cutoff)
		prefix := encoding.AppendBucketPrefix(nil, st.device, st.metric)
		it := snap.NewIterator(badger.IteratorOptions{Prefix: prefix})
		if cur.seek != nil {
			it.Seek(cur.seek)
		} else {
			it.Rewind()
		}
		for ; it.Valid(); it.Next() {
			item := it.Item()
			first, err := encoding.ParseBucketTail(item.Key())
			if err != nil {
				it.Close()
				return false, err
			}
			if first.TS >= cutoff {
				break
			}
			if len(dels) >= limit {
				cur.seek = item.KeyCopy(nil) // the next step goes on here
				more = true
				break
			}
			d, err := w.pruneBucket(item, st, cutoff)
			if err != nil {
				it.Close()
				return false, err
			}
			dels = append(dels, d)
		}
		it.Close()
		if more {
			break
		}
		// A day's open points go in one transaction, with the series'
		// last buckets.
		for day := range st.days() {
			if day > cutDay {
				continue
			}
			e, err := st.planDrop(day, func(p Sample) bool { return p.TS < cutoff })
			if err != nil {
				return false, err
			}
			for _, c := range e.changes {
				dels = append(dels, counted{key: c.old, readings: c.removed, newKey: c.keep.key, value: c.keep.value})
			}
			if e.removed > 0 {
				edits = append(edits, e)
			}
		}
	}
	if err := w.deleteCounted(dels); err != nil {
		return false, err
	}
	for _, e := range edits {
		e.apply()
	}
	return more, nil
}

// pruneBucket returns what deleting the readings of a bucket older than
// cutoff takes: the bucket, or, when it spans cutoff, the bucket and the
// rewrite of its newer readings.
func (w *Writer) pruneBucket(item *badger.Item, st *seriesState, cutoff int64) (counted, error) {
	var h encoding.BucketHeader
	var kept []Sample
	err := item.Value(func(v []byte) error {
		var err error
		if h, err = encoding.ParseBucketHeader(v); err != nil || h.Last < cutoff {
			return err
		}
		samples, err := encoding.DecodeBucket(nil, v)
		for _, smp := range samples {
			if smp.TS >= cutoff {
				kept = append(kept, smp)
			}
		}
		return err
	})
	if err != nil {
		return counted{}, fmt.Errorf("bucket %q: %w", item.Key(), err)
	}
	d := counted{key: item.KeyCopy(nil), readings: h.Count - len(kept)}
	if len(kept) > 0 {
		if d.value, err = encoding.AppendBucket(nil, kept); err != nil {
			return counted{}, err
		}
		d.newKey = encoding.AppendBucketKey(nil, st.device, st.metric, kept[0])
	}
	return d, nil
}

// counted is a key to delete and the readings it removes, and, for a
// bucket or a run of points cut in two, the key and value of the part
// that stays.
type counted struct {
	key           []byte
	readings      int
	newKey, value []byte
}

// deleteCounted deletes keys holding readings, in as few transactions as
// Badger takes, each with the reading count brought down by what it
// deletes.
func (w *Writer) deleteCounted(dels []counted) error {
	s := w.store
	for len(dels) > 0 {
		txn := s.db.NewTransaction(true)
		// Room for the reading count and the count of deletes since the
		// last compaction.
		budget := newTxnBudget(s.db, 2*metaEntrySize+16)
		budget.count++
		n, gone := 0, uint64(0)
		for ; n < len(dels) && budget.take(dels[n].key, nil) && (dels[n].newKey == nil || budget.take(dels[n].newKey, dels[n].value)); n++ {
			if err := txn.Delete(dels[n].key); err != nil {
				txn.Discard()
				return err
			}
			if dels[n].newKey != nil {
				if err := txn.Set(dels[n].newKey, dels[n].value); err != nil {
					txn.Discard()
					return err
				}
			}
			gone += uint64(dels[n].readings)
		}
		s.mu.RLock()
		total := s.readings - min(gone, s.readings)
		uncompacted := s.uncompacted + gone
		s.mu.RUnlock()
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaReadings), encoding.AppendUint64(nil, total)); err != nil {
			txn.Discard()
			return err
		}
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaUncompacted), encoding.AppendUint64(nil, uncompacted)); err != nil {
			txn.Discard()
			return err
		}
		if err := txn.Commit(); err != nil {
			txn.Discard()
			return err
		}
		s.mu.Lock()
		s.readings, s.uncompacted = total, uncompacted
		if gone > 0 {
			s.oldestGen++
			s.oldestValid = false
		}
		s.mu.Unlock()
		w.prunedReadings.Add(gone)
		dels = dels[n:]
	}
	return nil
}

// pruneStatsBefore deletes the aggregate records of each level that
// started before cut[level-Minute] (math.MinInt64: none), at most limit of
// them, and reports whether it stopped at the limit. Records that the next
// level is still to be rolled up from stay.
func (w *Writer) pruneStatsBefore(cut [3]int64, limit int) (more bool, err error) {
	snap := w.store.db.NewTransaction(false)
	defer snap.Discard()
	var keys [][]byte
	for _, st := range w.store.series {
		for i, l := range levels() {
			cutoff := cut[i]
			switch l {
			case aggregate.Minute:
				cutoff = min(cutoff, st.rolled[rolledHours])
			case aggregate.Hour:
				cutoff = min(cutoff, st.rolled[rolledDays])
			}
			if cutoff == math.MinInt64 {
				continue
			}
			if len(keys) >= limit {
				more = true
				break
			}
			if c := &st.stats[i]; c.Start < cutoff {
				*c = StatsAt{} // about to be deleted: forget it
			}
			prefix := encoding.AppendStatsPrefix(nil, l, st.device, st.metric)
			it := snap.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.Valid() && len(keys) < limit; it.Next() {
				k := it.Item().Key()
				if len(k) != len(prefix)+8 || encoding.DecodeTS(k[len(prefix):]) >= cutoff {
					break
				}
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
	}
	if len(keys) >= limit {
		more = true
	}
	return more, w.deleteKeys(keys)
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

// oldestRaw returns the timestamp of the oldest raw reading that the disk
// cap may delete: of the series whose newest reading is more than
// keepRecent newer than it (with a negative keepRecent, of every series).
func (w *Writer) oldestRaw(keepRecent time.Duration) (int64, bool, error) {
	oldest, found := int64(math.MaxInt64), false
	err := w.store.db.View(func(txn *badger.Txn) error {
		for _, st := range w.store.series {
			first := int64(math.MaxInt64)
			for _, pts := range st.days() {
				for _, p := range pts {
					first = min(first, p.TS)
				}
			}
			prefix := encoding.AppendBucketPrefix(nil, st.device, st.metric)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			it.Rewind()
			if it.Valid() {
				b, err := encoding.ParseBucketTail(it.Item().Key())
				if err != nil {
					it.Close()
					return err
				}
				first = min(first, b.TS)
			}
			it.Close()
			if first == math.MaxInt64 || keepRecent >= 0 && first >= keepCut(st, keepRecent) {
				continue
			}
			oldest, found = min(oldest, first), true
		}
		return nil
	})
	return oldest, found, err
}

// keepCut is the time from which the readings of st are within keepRecent
// of its newest one.
func keepCut(st *seriesState, keepRecent time.Duration) int64 {
	if st.next == math.MinInt64 {
		return math.MinInt64
	}
	return st.next - int64(keepRecent)
}

// oldestMinute returns the start of the oldest minute record that may be
// deleted: one whose hour is rolled up.
func (w *Writer) oldestMinute() (int64, bool, error) {
	oldest, found := int64(math.MaxInt64), false
	err := w.store.db.View(func(txn *badger.Txn) error {
		for _, st := range w.store.series {
			prefix := encoding.AppendStatsPrefix(nil, aggregate.Minute, st.device, st.metric)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			it.Rewind()
			if it.Valid() && len(it.Item().Key()) == len(prefix)+8 {
				if ts := encoding.DecodeTS(it.Item().Key()[len(prefix):]); ts < st.rolled[rolledHours] {
					oldest, found = min(oldest, ts), true
				}
			}
			it.Close()
		}
		return nil
	})
	return oldest, found, err
}

// DropOldestRaw has the running Writer delete the oldest raw readings for
// the disk cap, whatever the clock says, an hour at a time in steps
// between group commits: the readings of the oldest UTC hour that holds
// any, in every series, then of the next, until at least want readings
// are gone. The readings within keepRecent of their series' newest one
// stay (a negative keepRecent keeps none). It returns the readings
// deleted, the span of their hours, and whether nothing deletable is
// left.
func (w *Writer) DropOldestRaw(ctx context.Context, keepRecent time.Duration, want uint64) (n uint64, from, to int64, done bool, err error) {
	before := w.prunedReadings.Load()
	from = math.MaxInt64
	for n < want {
		var oldest int64
		var found bool
		if err = w.doCheckpointed(ctx, func() (err error) { oldest, found, err = w.oldestRaw(keepRecent); return err }); err != nil {
			return n, from, to, false, err
		}
		if !found {
			return n, from, to, true, nil
		}
		hourEnd := aggregate.Hour.Truncate(oldest) + int64(time.Hour)
		from, to = min(from, aggregate.Hour.Truncate(oldest)), hourEnd
		cutoffOf := func(_ *badger.Txn, st *seriesState) (int64, error) {
			if keepRecent < 0 {
				return hourEnd, nil
			}
			return min(hourEnd, keepCut(st, keepRecent)), nil
		}
		var cur pruneCursor
		for more := true; more; {
			if err = w.doCheckpointed(ctx, func() (err error) { more, err = w.pruneRaw(&cur, cutoffOf, pruneChunkKeys); return err }); err != nil {
				return w.prunedReadings.Load() - before, from, to, false, err
			}
		}
		was := n
		if n = w.prunedReadings.Load() - before; n == was {
			return n, from, to, true, nil // nothing went: do not go round again
		}
	}
	return n, from, to, false, nil
}

// DropOldestMinutes has the running Writer delete the minute records of
// the UTC day of the oldest one (those already rolled up into hours), in
// steps between group commits. It returns the records deleted.
func (w *Writer) DropOldestMinutes(ctx context.Context) (uint64, error) {
	var oldest int64
	var found bool
	if err := w.doCheckpointed(ctx, func() (err error) { oldest, found, err = w.oldestMinute(); return err }); err != nil || !found {
		return 0, err
	}
	cut := [3]int64{aggregate.Day.Truncate(oldest) + int64(aggregate.Day.Duration()), math.MinInt64, math.MinInt64}
	before := w.pruned.Load()
	for {
		var more bool
		err := w.doCheckpointed(ctx, func() (err error) { more, err = w.pruneStatsBefore(cut, pruneChunkKeys); return err })
		if err != nil || !more {
			return w.pruned.Load() - before, err
		}
	}
}
