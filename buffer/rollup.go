package buffer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Rolling up: a checkpoint updates only the minute record of a reading, so
// that a steady stream costs one record a series per checkpoint, not three. Once an
// hour is over (the series has a newer reading in a later hour, or the
// clock has passed the hour by rollUpGrace), its record is computed from
// its minute records; once all hours of a day are rolled up, the day's
// record from its hours. Both are recomputed whole, so doing it twice, or
// again after a crash, gives the same records. A reading that arrives late,
// for an hour or day already rolled up, updates those records in its
// checkpoint. Queries use minute (hour) records for the hours (days) not rolled
// up yet: seriesIndex.rolled says up to where records exist.

// rollUpGrace is how long after an hour ends the clock alone rolls it up.
const rollUpGrace = time.Minute

// RollUp has the running Writer roll up the hours and days that are over
// at now, as it does after checkpoints and every SealCheck, and returns the
// result. It is the one-step form of that, for tests and tools.
func (w *Writer) RollUp(ctx context.Context, now time.Time) error {
	return w.doCheckpointed(ctx, func() error { return w.rollUp(now, nil) })
}

// rollUp rolls up the series in only, or every series if only is nil.
// Used by the Run goroutine only.
func (w *Writer) rollUp(now time.Time, only []*seriesState) error {
	series := only
	if series == nil {
		for _, st := range w.store.series { // only this goroutine writes the map
			series = append(series, st)
		}
	}
	wall := aggregate.Hour.Truncate(now.Add(-rollUpGrace).UnixNano())
	type done struct {
		st  *seriesState
		end int64
	}
	for _, lv := range []struct {
		level, from aggregate.Level
		index       int
	}{{aggregate.Hour, aggregate.Minute, rolledHours}, {aggregate.Day, aggregate.Hour, rolledDays}} {
		snap := w.store.db.NewTransaction(false)
		var sets []kv
		var ends []done
		for _, st := range series {
			// Hours end with the series' newest reading or the clock; days
			// with the hours rolled up.
			end := lv.level.Truncate(max(st.next, wall))
			if lv.level == aggregate.Day {
				end = lv.level.Truncate(st.rolled[rolledHours])
			}
			if end <= st.rolled[lv.index] {
				continue
			}
			var err error
			if sets, err = w.rollUpRange(snap, sets, st, lv.level, lv.from, st.rolled[lv.index], end); err != nil {
				snap.Discard()
				return fmt.Errorf("roll up %s/%s: %w", st.device, st.metric, err)
			}
			ends = append(ends, done{st, end})
		}
		snap.Discard()
		if err := w.setKeys(sets); err != nil {
			return fmt.Errorf("roll up: %w", err)
		}
		w.store.mu.Lock()
		for _, d := range ends {
			d.st.rolled[lv.index] = d.end
		}
		w.store.mu.Unlock()
	}
	return nil
}

// rollUpRange appends to sets the records of level for the groups in
// [from, to) of st, each the merge of its records of the level below.
func (w *Writer) rollUpRange(snap *badger.Txn, sets []kv, st *seriesState, level, below aggregate.Level, from, to int64) ([]kv, error) {
	if st.text {
		return w.rollUpStatesRange(snap, sets, st, level, below, from, to)
	}
	var cur StatsAt
	flush := func() {
		if !cur.Stats.IsEmpty() {
			sets = append(sets, kv{encoding.AppendStatsKey(nil, level, st.device, st.metric, cur.Start), cur.Stats.Append(nil)})
		}
	}
	var reads Reads
	err := w.store.records(snap, nil, below, st.device, st.metric, from, to, &reads, func(start int64, s aggregate.Stats) {
		if g := level.Truncate(start); g != cur.Start || cur.Stats.IsEmpty() {
			flush()
			cur = StatsAt{Start: g}
		}
		cur.Stats.Merge(s)
	})
	flush()
	return sets, err
}

// setKeys writes sets in as few transactions as Badger takes, in order.
func (w *Writer) setKeys(sets []kv) error {
	for len(sets) > 0 {
		txn := w.store.db.NewTransaction(true)
		budget := newTxnBudget(w.store.db, 0)
		n := 0
		for ; n < len(sets) && budget.take(sets[n].key, sets[n].value); n++ {
			if err := txn.Set(sets[n].key, sets[n].value); err != nil {
				txn.Discard()
				return err
			}
		}
		if err := txn.Commit(); err != nil {
			txn.Discard()
			return err
		}
		sets = sets[n:]
	}
	return nil
}

// rollUpTouched rolls up the series of w.touched (those the last
// checkpoints wrote) that have a reading in a newer hour than they have
// rolled up to.
func (w *Writer) rollUpTouched() {
	var due []*seriesState
	for _, st := range w.touched {
		if aggregate.Hour.Truncate(st.next) > st.rolled[rolledHours] {
			due = append(due, st)
		}
	}
	if len(due) == 0 {
		return
	}
	// The clock plays no part here: only the series' own readings.
	if err := w.rollUp(time.Unix(0, math.MinInt64+int64(rollUpGrace)), due); err != nil {
		w.store.log.Error("rolling up aggregates failed; minute records answer meanwhile", "err", err)
	}
}
