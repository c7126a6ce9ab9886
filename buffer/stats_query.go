package buffer

import (
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/cairn-gateway/cairn/aggregate"
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
func (s *Store) StatsByLevel(device, metric string, level aggregate.Level, from, to int64) ([]StatsAt, Reads, error) {
	var out []StatsAt
	var reads Reads
	if from >= to {
		return nil, reads, nil
	}
	err := s.db.View(func(txn *badger.Txn) error {
		dur := int64(level.Duration())
		// The first and the last group may be partial.
		first := level.Truncate(from)
		wholeFrom := first
		if first < from {
			wholeFrom = first + dur
		}
		wholeTo := level.Truncate(to)
		if wholeFrom >= wholeTo { // no whole group: one or two partial ones
			return s.partials(txn, device, metric, level, from, to, &out, &reads)
		}
		if from < wholeFrom {
			if err := s.partial(txn, device, metric, from, wholeFrom, first, &out, &reads); err != nil {
				return err
			}
		}
		err := s.records(txn, level, device, metric, wholeFrom, wholeTo, &reads, func(start int64, st aggregate.Stats) {
			out = append(out, StatsAt{Start: start, Stats: st})
		})
		if err != nil {
			return err
		}
		if wholeTo < to {
			return s.partial(txn, device, metric, wholeTo, to, wholeTo, &out, &reads)
		}
		return nil
	})
	if err != nil {
		return nil, reads, fmt.Errorf("stats %s/%s: %w", device, metric, err)
	}
	return out, reads, nil
}

// partials handles a range within at most two groups, neither whole.
func (s *Store) partials(txn *badger.Txn, device, metric string, level aggregate.Level, from, to int64, out *[]StatsAt, reads *Reads) error {
	split := level.Truncate(to)
	if split <= from {
		return s.partial(txn, device, metric, from, to, level.Truncate(from), out, reads)
	}
	if err := s.partial(txn, device, metric, from, split, level.Truncate(from), out, reads); err != nil {
		return err
	}
	return s.partial(txn, device, metric, split, to, split, out, reads)
}

// partial appends the aggregate of [from, to) as the group at start, if
// it holds readings.
func (s *Store) partial(txn *badger.Txn, device, metric string, from, to, start int64, out *[]StatsAt, reads *Reads) error {
	st, err := s.cover(txn, device, metric, from, to, reads)
	if err != nil || st.IsEmpty() {
		return err
	}
	*out = append(*out, StatsAt{Start: start, Stats: st})
	return nil
}

// StatsCover returns the aggregate of a series' readings in [from, to),
// from the fewest records: whole days in the middle, whole hours and
// minutes at the edges of those, and raw readings for the partial minutes
// at the very ends, if raw readings are still stored.
func (s *Store) StatsCover(device, metric string, from, to int64) (aggregate.Stats, Reads, error) {
	var st aggregate.Stats
	var reads Reads
	err := s.db.View(func(txn *badger.Txn) (err error) {
		st, err = s.cover(txn, device, metric, from, to, &reads)
		return err
	})
	if err != nil {
		return st, reads, fmt.Errorf("stats %s/%s: %w", device, metric, err)
	}
	return st, reads, nil
}

func (s *Store) cover(txn *badger.Txn, device, metric string, from, to int64, reads *Reads) (aggregate.Stats, error) {
	var total aggregate.Stats
	if from >= to {
		return total, nil
	}
	plan := aggregate.Cover(from, to)
	for _, raw := range []aggregate.Range{plan.RawHead, plan.RawTail} {
		if raw.From >= raw.To {
			continue
		}
		q := Query{Device: device, Metric: metric, From: raw.From, To: raw.To, Limit: math.MaxInt}
		err := s.scan(txn, q, func(r Reading) bool {
			total.Add(r.Value)
			reads.Readings++
			return true
		})
		if err != nil {
			return total, err
		}
	}
	merge := func(_ int64, st aggregate.Stats) { total.Merge(st) }
	for _, lv := range []struct {
		level  aggregate.Level
		ranges []aggregate.Range
	}{{aggregate.Minute, plan.Minutes}, {aggregate.Hour, plan.Hours}, {aggregate.Day, plan.Days}} {
		for _, r := range lv.ranges {
			if err := s.records(txn, lv.level, device, metric, r.From, r.To, reads, merge); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// records calls fn with each record of a level of a series that starts in
// [from, to), in order.
func (s *Store) records(txn *badger.Txn, level aggregate.Level, device, metric string, from, to int64, reads *Reads, fn func(start int64, st aggregate.Stats)) error {
	prefix := appendStatsPrefix(nil, level, device, metric)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Seek(appendTS(prefix[:len(prefix):len(prefix)], from)); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("%w: %q", errBadKey, k)
		}
		start := decodeTS(k[len(prefix):])
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
		fn(start, st)
	}
	return nil
}
