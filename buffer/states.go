package buffer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The aggregates of a text series: its records under the same 'm', 'h' and
// 'd' keys as a number series' _stats, but each an aggregate.States (the
// readings of the minute, hour or day: their count, first and last, and
// per state its count and time between the first and the last). A
// checkpoint writes them in the transaction that writes the readings'
// runs, as it writes a number's: for each minute that the journal's
// readings of a text series touch, it adds them to the minute's record
// (aggregate.States.Add), and where a reading falls between the record's
// first and last, builds the record again from the minute's raw readings,
// the runs the transaction has just written included. A reading of an
// hour (day) already rolled up updates that hour's (day's) record too, by
// Add, or by merging again the hour's minute (the day's hour) records the
// transaction holds, or from the raw readings if those are gone. Roll-ups
// merge minute records into hours and hours into days, in time order. A
// duplicate is never held (commit.go), so it changes no record; a crash
// keeps or loses the runs and the records together, and the log's replay
// holds again what the last checkpoint did not write. The Writer keeps
// nothing per text series beyond what a checkpoint is writing.

// statesEntrySize is what a States record of a series of at most
// maxStates states costs a transaction beyond its key: its longest
// encoding (aggregate.States.Append) and Badger's two metadata bytes.
func statesEntrySize(maxStates int) int64 {
	return int64(34+25*maxStates) + 2
}

// reserveStates takes from b the records that a text reading of st at ts
// would add to the next checkpoint, and reports whether they fit.
func (w *Writer) reserveStates(b *txnBudget, st *seriesState, ts int64) bool {
	keyLen := int64(1 + len(st.device) + 1 + len(st.metric) + 1 + 8)
	for _, l := range statsLevels(st, ts) {
		k := statKey{l, st, l.Truncate(ts)}
		if _, ok := w.ckpt.states[k]; ok {
			continue
		}
		if !b.takeSize(keyLen + statesEntrySize(w.opts.MaxStates)) {
			return false
		}
		if w.ckpt.states == nil {
			w.ckpt.states = make(map[statKey]struct{})
		}
		w.ckpt.states[k] = struct{}{}
	}
	return true
}

// writeStates writes the records of the text series of the journal. Their
// readings (seriesWork.unflushed) are sorted and in txn as runs already
// (writeRuns).
func (w *Writer) writeStates(txn *badger.Txn) error {
	for _, st := range w.ckpt.dirty {
		if !st.text || len(st.unflushed) == 0 {
			continue
		}
		if err := w.writeStatesOf(txn, st); err != nil {
			return fmt.Errorf("states of %s/%s: %w", st.device, st.metric, err)
		}
	}
	return nil
}

// writeStatesOf writes the records that the journal's readings of st touch:
// minutes, then the hours and days already rolled up, each level from the
// one below written just before.
func (w *Writer) writeStatesOf(txn *badger.Txn, st *seriesState) error {
	smps := make([]aggregate.Sample, len(st.unflushed))
	for i, s := range st.unflushed {
		smps[i] = aggregate.Sample{TS: s.TS, ID: uint32(s.Value)}
	}
	for i, l := range allLevels {
		rolled := int64(math.MaxInt64)
		if l != aggregate.Minute {
			rolled = st.rolled[i-1]
		}
		for rest := smps; len(rest) > 0; {
			start := l.Truncate(rest[0].TS)
			n := 1
			for n < len(rest) && l.Truncate(rest[n].TS) == start {
				n++
			}
			group := rest[:n]
			rest = rest[n:]
			if start >= rolled {
				continue // its record is rolled up from the level below later
			}
			if err := w.updateStates(txn, st, l, start, group); err != nil {
				return err
			}
		}
	}
	return nil
}

// updateStates adds the new readings smps, in time order, to the record of
// level at start of st in txn.
func (w *Writer) updateStates(txn *badger.Txn, st *seriesState, level aggregate.Level, start int64, smps []aggregate.Sample) error {
	key := encoding.AppendStatsKey(nil, level, st.device, st.metric, start)
	cur, err := getStates(txn, key)
	known := err == nil
	if err != nil && !errors.Is(err, aggregate.ErrBadStates) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	want := cur.Count + uint64(len(smps))
	added := known
	for _, s := range smps {
		if !added {
			break
		}
		added = cur.Add(s)
	}
	if !added {
		if cur, err = w.rebuildStates(txn, st, level, start, want, known); err != nil {
			return err
		}
	}
	return txn.Set(key, cur.Append(nil))
}

// rebuildStates builds the record of level at start of st from what txn
// holds: a minute from its raw readings; an hour (a day) from its minute
// (hour) records, or from its raw readings if those records do not hold
// want readings (pruned ones), or if want is not known.
func (w *Writer) rebuildStates(txn *badger.Txn, st *seriesState, level aggregate.Level, start int64, want uint64, known bool) (aggregate.States, error) {
	end := start + int64(level.Duration())
	if level != aggregate.Minute && known {
		below := aggregate.Minute
		if level == aggregate.Day {
			below = aggregate.Hour
		}
		var rec aggregate.States
		err := statesRecords(txn, below, st.device, st.metric, start, end, nil, func(_ int64, s aggregate.States) error {
			return rec.Merge(s)
		})
		if err != nil {
			return aggregate.States{}, err
		}
		if rec.Count == want {
			return rec, nil
		}
	}
	smps, err := rawStates(txn, nil, st.device, st.metric, start, end, false, math.MaxInt)
	if err != nil {
		return aggregate.States{}, err
	}
	return aggregate.FromSamples(smps), nil
}

// getStates reads the States record under key; a missing one is empty.
func getStates(txn *badger.Txn, key []byte) (aggregate.States, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return aggregate.States{}, nil
	}
	if err != nil {
		return aggregate.States{}, err
	}
	var st aggregate.States
	err = item.Value(func(v []byte) (err error) {
		st, err = aggregate.DecodeStates(v)
		return err
	})
	if err != nil {
		return aggregate.States{}, fmt.Errorf("states %q: %w", key, err)
	}
	return st, nil
}

// statesRecords calls fn with each States record of a level of a series
// that starts in [from, to), in time order, and counts them in reads (if
// not nil).
func statesRecords(txn *badger.Txn, level aggregate.Level, device, metric string, from, to int64, reads *Reads, fn func(start int64, s aggregate.States) error) error {
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
		var s aggregate.States
		err := item.Value(func(v []byte) (err error) {
			s, err = aggregate.DecodeStates(v)
			return err
		})
		if err != nil {
			return fmt.Errorf("states %q: %w", k, err)
		}
		if reads != nil {
			reads.Records++
		}
		if err := fn(start, s); err != nil {
			return err
		}
	}
	return nil
}

// rawStates returns the raw readings of a text series in [from, to), with
// those of journal (the journal's readings of the series in the range), as
// samples of their ids: at most limit of them, oldest first, or newest
// first if desc.
func rawStates(txn *badger.Txn, journal []Sample, device, metric string, from, to int64, desc bool, limit int) ([]aggregate.Sample, error) {
	q := Query{Device: device, Metric: metric, From: from, To: to, Desc: desc, Limit: limit}
	var in []Sample
	for _, s := range journal {
		if s.TS >= from && s.TS < to {
			in = append(in, s)
		}
	}
	c, err := newCursor(txn, q, metric, in) // no texts: values are ids
	if err != nil {
		return nil, err
	}
	defer c.close()
	var out []aggregate.Sample
	for n := 0; n < limit; n++ {
		if err := c.next(); err != nil {
			return nil, err
		}
		if !c.ok {
			break
		}
		out = append(out, aggregate.Sample{TS: c.cur.TS, ID: uint32(c.cur.Value)})
	}
	return out, nil
}

// rollUpStatesRange is rollUpRange for a text series: each record of level
// in [from, to) is the merge, in time order, of its records of the level
// below.
func (w *Writer) rollUpStatesRange(snap *badger.Txn, sets []kv, st *seriesState, level, below aggregate.Level, from, to int64) ([]kv, error) {
	var cur aggregate.States
	start := int64(0)
	flush := func() {
		if !cur.IsEmpty() {
			sets = append(sets, kv{encoding.AppendStatsKey(nil, level, st.device, st.metric, start), cur.Append(nil)})
		}
		cur = aggregate.States{}
	}
	err := statesRecords(snap, below, st.device, st.metric, from, to, nil, func(at int64, s aggregate.States) error {
		if g := level.Truncate(at); g != start || cur.IsEmpty() {
			flush()
			start = g
		}
		return cur.Merge(s)
	})
	flush()
	return sets, err
}

// StateTime is the time a text series spent in one state within a group,
// and its readings there.
type StateTime struct {
	Text  string // the state
	Count uint64 // its readings in the group
	Dur   uint64 // its time in the group, in nanoseconds
}

// StatesAt is the time in state of a text series within one group (a
// minute, an hour, a day, or a whole range): a state lasts from its
// reading until the series' next reading, the last one until now.
type StatesAt struct {
	Start int64 // the group's first nanosecond (the range's from for a whole range)
	Count uint64
	// States holds each state with a reading or some time in the group,
	// in the order the series first met them.
	States []StateTime
	// Unknown is the time of the group before the series' first reading,
	// in nanoseconds.
	Unknown uint64
}

// StatesByLevel returns the time in state of a text series in [from, to)
// at now, per group of level, oldest first: each group that holds a
// reading or some time in a state. A group the range covers in part
// counts only its time within the range.
func (s *Store) StatesByLevel(device, metric string, level aggregate.Level, from, to, now int64) ([]StatesAt, Reads, error) {
	return s.statesQuery(device, metric, level, false, from, to, now)
}

// StatesCover returns the time in state of a text series over the whole
// of [from, to) at now, from the fewest records: whole days, hours and
// minutes, and raw readings for the partial minutes at the ends.
func (s *Store) StatesCover(device, metric string, from, to, now int64) (StatesAt, Reads, error) {
	out, reads, err := s.statesQuery(device, metric, 0, true, from, to, now)
	if err != nil || len(out) == 0 {
		return StatesAt{Start: from}, reads, err
	}
	return out[0], reads, nil
}

// statesQuery answers StatesByLevel, or StatesCover if whole.
func (s *Store) statesQuery(device, metric string, level aggregate.Level, whole bool, from, to, now int64) ([]StatesAt, Reads, error) {
	var reads Reads
	if from >= to {
		return nil, reads, nil
	}
	var out []StatesAt
	sp := span{device: device, metrics: []string{metric}, from: math.MinInt64, to: math.MaxInt64, records: true}
	err := s.view(sp, func(txn *badger.Txn, j *unflushed) error {
		texts := s.Texts(device, metric) // after the snapshot: it names every id the snapshot holds
		journal := j.samplesOf(metric, math.MinInt64, math.MaxInt64)
		prior, err := rawStates(txn, journal, device, metric, math.MinInt64, from, true, 1)
		if err != nil {
			return err
		}
		newest, err := rawStates(txn, journal, device, metric, math.MinInt64, math.MaxInt64, true, 1)
		if err != nil {
			return err
		}
		reads.Readings += len(prior) + len(newest)
		var in aggregate.Prior
		if len(prior) > 0 {
			in = aggregate.Prior{ID: prior[0].ID, Known: true}
		} else if in, err = priorFromRecords(txn, device, metric, from); err != nil {
			return err
		}
		groups := [][2]int64{{from, to}}
		if !whole {
			groups = groups[:0]
			dur := int64(level.Duration())
			for g := level.Truncate(from); g < to; g += dur {
				groups = append(groups, [2]int64{max(g, from), min(g+dur, to)})
				if g > math.MaxInt64-dur {
					break
				}
			}
		}
		// Whole groups up to where the level has records are read in one
		// pass, but those the journal has readings in.
		var recs map[int64]aggregate.States
		dirty := map[int64]bool{}
		wholeFrom, cut := int64(0), int64(0)
		if !whole {
			dur := int64(level.Duration())
			for _, smp := range journal {
				dirty[level.Truncate(smp.TS)] = true
			}
			wholeFrom = level.Truncate(from)
			if wholeFrom < from && wholeFrom <= math.MaxInt64-dur {
				wholeFrom += dur
			}
			wholeTo := level.Truncate(to)
			cut = min(max(j.rolled[metric].cut(level), wholeFrom), wholeTo)
			if wholeFrom < cut {
				recs = map[int64]aggregate.States{}
				err := statesRecords(txn, level, device, metric, wholeFrom, cut, &reads, func(start int64, rec aggregate.States) error {
					recs[start] = rec
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		for _, g := range groups {
			var rec aggregate.States
			if recs != nil && g[0] >= wholeFrom && g[1] <= cut && !dirty[g[0]] {
				rec = recs[g[0]]
			} else if rec, err = s.statesIn(txn, j, device, metric, g[0], g[1], &reads); err != nil {
				return err
			}
			ti, err := rec.TimeIn(aggregate.StateQuery{From: g[0], To: g[1], Now: now, Before: in,
				ReadingAfter: len(newest) > 0 && newest[0].TS >= g[1]})
			if err != nil {
				return err
			}
			in = rec.Carry(in)
			at := StatesAt{Start: g[0], Count: ti.Count, Unknown: ti.Unknown}
			if !whole {
				at.Start = level.Truncate(g[0])
			}
			for _, e := range ti.PerState {
				text := fmt.Sprintf("#%d", e.ID) // an id the dictionary lacks: none of a consistent store
				if int(e.ID) < len(texts) {
					text = texts[e.ID]
				}
				at.States = append(at.States, StateTime{Text: text, Count: e.Count, Dur: e.Dur})
			}
			if whole || at.Count > 0 || len(at.States) > 0 {
				out = append(out, at)
			}
		}
		return nil
	})
	if err != nil {
		return nil, reads, fmt.Errorf("states %s/%s: %w", device, metric, err)
	}
	return out, reads, nil
}

// priorFromRecords returns the state of a series' newest reading before
// from as its records hold it, for when no raw reading before from is
// left (retention removes the oldest first): the Last of the newest
// record, of any level, that ends by from. No state if there is none.
func priorFromRecords(txn *badger.Txn, device, metric string, from int64) (aggregate.Prior, error) {
	var best aggregate.Sample
	found := false
	for _, l := range allLevels {
		dur := int64(l.Duration())
		if from < math.MinInt64+dur {
			continue
		}
		prefix := encoding.AppendStatsPrefix(nil, l, device, metric)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		it.Seek(encoding.AppendTS(prefix[:len(prefix):len(prefix)], from-dur))
		var rec aggregate.States
		var err error
		if it.Valid() {
			err = it.Item().Value(func(v []byte) (err error) {
				rec, err = aggregate.DecodeStates(v)
				return err
			})
		}
		it.Close()
		if err != nil {
			return aggregate.Prior{}, fmt.Errorf("states before %d: %w", from, err)
		}
		if rec.Count > 0 && (!found || best.Compare(rec.Last) < 0) {
			best, found = rec.Last, true
		}
	}
	return aggregate.Prior{ID: best.ID, Known: found}, nil
}

// statesPiece is a part of a range that statesIn reads: the records of a
// level, or raw readings.
type statesPiece struct {
	from, to int64
	level    aggregate.Level
	raw      bool
}

// statesIn returns the States of a text series' readings in [from, to):
// the records of whole days, hours and minutes (as far as they are rolled
// up, Cover) and raw readings for the partial minutes at the ends, merged
// in time order. A part the journal has readings in is read raw: its
// records do not hold them yet.
func (s *Store) statesIn(txn *badger.Txn, j *unflushed, device, metric string, from, to int64, reads *Reads) (aggregate.States, error) {
	wm := j.rolled[metric]
	var pieces []statesPiece
	for _, part := range []struct {
		from, to int64
		top      aggregate.Level
	}{
		{from, min(to, wm.days), aggregate.Day},
		{max(from, wm.days), min(to, wm.hours), aggregate.Hour},
		{max(from, wm.hours), to, aggregate.Minute},
	} {
		if part.from >= part.to {
			continue
		}
		plan := aggregate.Cover(part.from, part.to)
		for _, r := range []aggregate.Range{plan.RawHead, plan.RawTail} {
			if r.From < r.To {
				pieces = append(pieces, statesPiece{from: r.From, to: r.To, raw: true})
			}
		}
		for _, lv := range []struct {
			level  aggregate.Level
			ranges []aggregate.Range
		}{{aggregate.Minute, plan.Minutes}, {aggregate.Hour, plan.Hours}, {aggregate.Day, plan.Days}} {
			for _, r := range lv.ranges {
				if r.From < r.To {
					pieces = append(pieces, statesPiece{from: r.From, to: r.To, level: min(lv.level, part.top)})
				}
			}
		}
	}
	slices.SortFunc(pieces, func(a, b statesPiece) int {
		switch {
		case a.from < b.from:
			return -1
		case a.from > b.from:
			return 1
		}
		return 0
	})
	var total aggregate.States
	for _, p := range pieces {
		journal := j.samplesOf(metric, p.from, p.to)
		if p.raw || len(journal) > 0 {
			smps, err := rawStates(txn, journal, device, metric, p.from, p.to, false, math.MaxInt)
			if err != nil {
				return total, err
			}
			reads.Readings += len(smps)
			if err := total.Merge(aggregate.FromSamples(smps)); err != nil {
				return total, err
			}
			continue
		}
		err := statesRecords(txn, p.level, device, metric, p.from, p.to, reads, func(_ int64, rec aggregate.States) error {
			return total.Merge(rec)
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
