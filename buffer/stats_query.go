package buffer

import (
	"fmt"
	"math"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// StatsAt is the aggregate of the readings of one group (a minute, an hour
// or a day) of a series.
type StatsAt struct {
	Start int64 // the group's first nanosecond
	Stats aggregate.Stats
}

// Reads counts what a stats query read.
type Reads struct {
	Records  int // _stats records
	Readings int // raw readings, for partial minutes at the ends
}

// StatsByLevel returns the aggregates of a series' readings in [from, to),
// one per group of the level that holds readings, oldest first. A group
// that the range covers only in part aggregates only the readings in the
// range (by StatsCover); whole groups are read from their records.
// A text series has none: its records are States (StatesByLevel).
func (s *Store) StatsByLevel(device, metric string, level aggregate.Level, from, to int64) ([]StatsAt, Reads, error) {
	var out []StatsAt
	var reads Reads
	if from >= to || s.IsText(device, metric) { // a text series' records are States (states.go)
		return nil, reads, nil
	}
	sp := span{device: device, metrics: []string{metric}, from: from, to: to, records: true}
	err := s.view(sp, func(txn *badger.Txn, j *unflushed) error {
		wm := j.rolled[metric]
		dur := int64(level.Duration())
		// The first and the last group may be partial.
		first := level.Truncate(from)
		wholeFrom := first
		if first < from {
			wholeFrom = first + dur
		}
		wholeTo := level.Truncate(to)
		if wholeFrom >= wholeTo { // no whole group: one or two partial ones
			return s.partials(txn, j, device, metric, level, from, to, wm, &out, &reads)
		}
		if from < wholeFrom {
			if err := s.partial(txn, j, device, metric, from, wholeFrom, first, wm, &out, &reads); err != nil {
				return err
			}
		}
		// Whole groups have records up to the roll-up mark; later ones are
		// added up from the level below.
		cut := min(max(wm.cut(level), wholeFrom), wholeTo)
		err := s.records(txn, j, level, device, metric, wholeFrom, cut, &reads, func(start int64, st aggregate.Stats) {
			out = append(out, StatsAt{Start: start, Stats: st})
		})
		if err != nil {
			return err
		}
		for g := cut; g < wholeTo; g += dur {
			if err := s.partial(txn, j, device, metric, g, g+dur, g, wm, &out, &reads); err != nil {
				return err
			}
		}
		if wholeTo < to {
			return s.partial(txn, j, device, metric, wholeTo, to, wholeTo, wm, &out, &reads)
		}
		return nil
	})
	if err != nil {
		return nil, reads, fmt.Errorf("stats %s/%s: %w", device, metric, err)
	}
	return out, reads, nil
}

// partials handles a range within at most two groups, neither whole.
func (s *Store) partials(txn *badger.Txn, j *unflushed, device, metric string, level aggregate.Level, from, to int64, wm rolledTo, out *[]StatsAt, reads *Reads) error {
	split := level.Truncate(to)
	if split <= from {
		return s.partial(txn, j, device, metric, from, to, level.Truncate(from), wm, out, reads)
	}
	if err := s.partial(txn, j, device, metric, from, split, level.Truncate(from), wm, out, reads); err != nil {
		return err
	}
	return s.partial(txn, j, device, metric, split, to, split, wm, out, reads)
}

// partial appends the aggregate of [from, to) as the group at start, if
// it holds readings.
func (s *Store) partial(txn *badger.Txn, j *unflushed, device, metric string, from, to, start int64, wm rolledTo, out *[]StatsAt, reads *Reads) error {
	st, err := s.cover(txn, j, device, metric, from, to, wm, reads)
	if err != nil || st.IsEmpty() {
		return err
	}
	*out = append(*out, StatsAt{Start: start, Stats: st})
	return nil
}

// StatsCover returns the aggregate of a series' readings in [from, to),
// from the fewest records: whole days in the middle, whole hours and
// minutes at the edges of those, and raw readings for the partial minutes
// at the very ends, if raw readings are still stored. A text series has
// none (StatesCover).
func (s *Store) StatsCover(device, metric string, from, to int64) (aggregate.Stats, Reads, error) {
	var st aggregate.Stats
	var reads Reads
	if from >= to || s.IsText(device, metric) { // a text series' records are States (states.go)
		return st, reads, nil
	}
	sp := span{device: device, metrics: []string{metric}, from: from, to: to, records: true}
	err := s.view(sp, func(txn *badger.Txn, j *unflushed) (err error) {
		st, err = s.cover(txn, j, device, metric, from, to, j.rolled[metric], &reads)
		return err
	})
	if err != nil {
		return st, reads, fmt.Errorf("stats %s/%s: %w", device, metric, err)
	}
	return st, reads, nil
}

func (s *Store) cover(txn *badger.Txn, j *unflushed, device, metric string, from, to int64, wm rolledTo, reads *Reads) (aggregate.Stats, error) {
	var total aggregate.Stats
	// Day records exist before wm.days, hour records before wm.hours.
	for _, part := range []struct {
		from, to int64
		max      aggregate.Level
	}{
		{from, min(to, wm.days), aggregate.Day},
		{max(from, wm.days), min(to, wm.hours), aggregate.Hour},
		{max(from, wm.hours), to, aggregate.Minute},
	} {
		if part.from >= part.to {
			continue
		}
		if err := s.coverPart(txn, j, device, metric, part.from, part.to, part.max, &total, reads); err != nil {
			return total, err
		}
	}
	return total, nil
}

// coverPart adds to total the readings of [from, to) from the fewest
// records of levels up to top; ranges of higher levels are read as records
// of top (they are aligned to it as well).
func (s *Store) coverPart(txn *badger.Txn, j *unflushed, device, metric string, from, to int64, top aggregate.Level, total *aggregate.Stats, reads *Reads) error {
	plan := aggregate.Cover(from, to)
	for _, raw := range []aggregate.Range{plan.RawHead, plan.RawTail} {
		if raw.From >= raw.To {
			continue
		}
		q := Query{Device: device, Metric: metric, From: raw.From, To: raw.To, Limit: math.MaxInt}
		err := s.scan(txn, j, q, []string{metric}, func(r Reading) bool {
			total.Add(r.Value)
			reads.Readings++
			return true
		})
		if err != nil {
			return err
		}
	}
	merge := func(_ int64, st aggregate.Stats) { total.Merge(st) }
	for _, lv := range []struct {
		level  aggregate.Level
		ranges []aggregate.Range
	}{{aggregate.Minute, plan.Minutes}, {aggregate.Hour, plan.Hours}, {aggregate.Day, plan.Days}} {
		for _, r := range lv.ranges {
			if err := s.records(txn, j, min(lv.level, top), device, metric, r.From, r.To, reads, merge); err != nil {
				return err
			}
		}
	}
	return nil
}

// rolledTo says up to where a series has hour and day records.
type rolledTo struct{ hours, days int64 }

// rolled returns the roll-up marks of a series. Read them before opening
// the transaction that uses them, or on the Writer's goroutine with it
// (view): records only ever get ahead of them, and minute records are
// pruned only behind them.
func (s *Store) rolled(device, metric string) rolledTo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.series[seriesID(device, metric)]
	if st == nil {
		return rolledTo{math.MinInt64, math.MinInt64}
	}
	return rolledTo{hours: st.rolled[rolledHours], days: st.rolled[rolledDays]}
}

// cut returns the end of the records of level.
func (wm rolledTo) cut(level aggregate.Level) int64 {
	switch level {
	case aggregate.Hour:
		return wm.hours
	case aggregate.Day:
		return wm.days
	}
	return math.MaxInt64
}

// records calls fn with each record of a level of a series that starts in
// [from, to), in order, each with what the journal j adds to it, as the
// checkpoint would merge it; a record the checkpoint would make is only
// what j adds.
func (s *Store) records(txn *badger.Txn, j *unflushed, level aggregate.Level, device, metric string, from, to int64, reads *Reads, fn func(start int64, st aggregate.Stats)) error {
	deltas := j.deltasOf(metric, level, from, to)
	emit := func(start int64, st aggregate.Stats) {
		for len(deltas) > 0 && deltas[0].Start < start {
			var rec aggregate.Stats
			rec.Merge(deltas[0].Stats)
			fn(deltas[0].Start, rec)
			deltas = deltas[1:]
		}
		if len(deltas) > 0 && deltas[0].Start == start {
			st.Merge(deltas[0].Stats)
			deltas = deltas[1:]
		}
		fn(start, st)
	}
	prefix := encoding.AppendStatsPrefix(nil, level, device, metric)
	// No prefetching: it starts a goroutine per record to copy the
	// record's value, which Value does anyway (values stay in the LSM
	// tree, so there is no value log to read ahead from), and fills up to
	// 64 records ahead, past the range's end.
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(encoding.AppendTS(prefix[:len(prefix):len(prefix)], from)); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("%w: %q", encoding.ErrBadKey, k)
		}
		start := encoding.DecodeTS(k[len(prefix):])
		if start >= to {
			break
		}
		var st aggregate.Stats
		err := item.Value(func(v []byte) (err error) {
			st, err = aggregate.Decode(v)
			return err
		})
		if err != nil {
			return fmt.Errorf("stats %q: %w", k, err)
		}
		reads.Records++
		emit(start, st)
	}
	for _, d := range deltas {
		var rec aggregate.Stats
		rec.Merge(d.Stats)
		fn(d.Start, rec)
	}
	return nil
}
