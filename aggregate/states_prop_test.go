package aggregate

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// bruteTimeIn computes the answer to a time-in-state query from the raw
// readings of a series, by the definition: each reading's state lasts from
// it until the next reading (in (time, id) order), the last one's until
// now (or not at all if now is before it); the time before the first
// reading (or before now, with no reading) is in no state; each span
// counts for its part within [from, to).
// The readings must be sorted in (time, id) order.
func bruteTimeIn(rs []Sample, from, to, now int64) TimeInState {
	// within returns the length of [a, b) ∩ [from, to).
	within := func(a, b int64) uint64 {
		a, b = max(a, from), min(b, to)
		if a >= b {
			return 0
		}
		return span(a, b)
	}
	var res TimeInState
	count := map[uint32]uint64{}
	dur := map[uint32]uint64{}
	if len(rs) == 0 {
		res.Unknown = within(math.MinInt64, now)
	} else {
		res.Unknown = within(math.MinInt64, rs[0].TS)
	}
	for i, r := range rs {
		end := max(r.TS, now)
		if i+1 < len(rs) {
			end = rs[i+1].TS
		}
		if d := within(r.TS, end); d > 0 {
			dur[r.ID] += d
		}
		if from <= r.TS && r.TS < to {
			count[r.ID]++
			res.Count++
		}
	}
	ids := slices.Sorted(maps.Keys(count))
	for id := range dur {
		if _, ok := count[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		res.PerState = append(res.PerState, StateStats{ID: id, Count: count[id], Dur: dur[id]})
	}
	return res
}

// genReadings returns a random series of distinct readings over about
// three days from t0: dense minutes (readings milliseconds apart, some at
// the same time), readings minutes apart, gaps of hours, and readings on
// minute, hour and day boundaries.
func genReadings(rng *rand.Rand, t0 int64) []Sample {
	states := uint32(1 + rng.IntN(6))
	n := 20 + rng.IntN(400)
	seen := map[Sample]bool{}
	var out []Sample
	ts := t0 + rng.Int64N(int64(time.Hour))
	for len(out) < n {
		switch p := rng.IntN(100); {
		case p < 10: // same time as the reading before
		case p < 50: // dense
			ts += rng.Int64N(int64(2 * time.Second))
		case p < 85: // minutes apart
			ts += rng.Int64N(int64(10 * time.Minute))
		case p < 92: // on the next minute, hour or day boundary
			l := []Level{Minute, Hour, Day}[rng.IntN(3)]
			ts = l.Truncate(ts) + int64(l.Duration())
		default: // hours without a reading
			ts += rng.Int64N(int64(20 * time.Hour))
		}
		r := Sample{TS: ts, ID: uint32(rng.IntN(int(states)))}
		if rng.IntN(4) == 0 && len(out) > 0 { // the state holds
			r.ID = out[len(out)-1].ID
		}
		if seen[r] { // the store keeps a reading once
			continue
		}
		seen[r] = true
		out = append(out, r)
	}
	return out
}

// arrive returns readings in an arrival order: time order, but for some
// readings that arrive late, up to all the rest later.
func arrive(rng *rand.Rand, readings []Sample) []Sample {
	out := slices.Clone(readings)
	for range rng.IntN(len(out)/5 + 1) {
		i := rng.IntN(len(out))
		j := i + rng.IntN(len(out)-i)
		r := out[i]
		out = slices.Delete(out, i, i+1)
		out = slices.Insert(out, j, r)
	}
	return out
}

// statesStore keeps States records as the store does: minute records
// built by Add, or from their readings again when Add cannot take a late
// one, then hours rolled up from minutes and days from hours.
type statesStore struct {
	raw     map[int64][]Sample         // readings by minute
	records map[Level]map[int64]States // records by level and start
	rebuilt int                        // minute records built again by FromSamples
}

func newStatesStore() *statesStore {
	return &statesStore{raw: map[int64][]Sample{}, records: map[Level]map[int64]States{
		Minute: {}, Hour: {}, Day: {},
	}}
}

func (st *statesStore) add(t *testing.T, r Sample) {
	m := Minute.Truncate(r.TS)
	st.raw[m] = append(st.raw[m], r)
	rec := st.records[Minute][m]
	if !rec.Add(r) {
		rec = FromSamples(slices.Clone(st.raw[m]))
		st.rebuilt++
	}
	st.records[Minute][m] = rec
	if want := FromSamples(slices.Clone(st.raw[m])); !equalStates(rec, want) {
		t.Fatalf("minute %d after adding %+v: got %+v, want %+v as built from its readings", m, r, rec, want)
	}
}

// rollUp builds the hour records from the minutes and the day records from
// the hours, folding each in time order, checks each against the record
// built from its readings, and keeps each as it decodes from its bytes.
func (st *statesStore) rollUp(t *testing.T) {
	for _, lv := range [][2]Level{{Minute, Hour}, {Hour, Day}} {
		fine, coarse := lv[0], lv[1]
		starts := slices.Sorted(maps.Keys(st.records[fine]))
		for _, s := range starts {
			c := coarse.Truncate(s)
			rec := st.records[coarse][c]
			if err := rec.Merge(st.records[fine][s]); err != nil {
				t.Fatalf("roll up %v %d into %v %d: %v", fine, s, coarse, c, err)
			}
			st.records[coarse][c] = rec
		}
	}
	for lvl, recs := range st.records {
		for start, rec := range recs {
			var in []Sample
			for m := start; m < start+int64(lvl.Duration()); m += int64(time.Minute) {
				in = append(in, st.raw[m]...)
			}
			if want := FromSamples(in); !equalStates(rec, want) {
				t.Fatalf("%v %d: got %+v rolled up, want %+v", lvl, start, rec, want)
			}
			// The store keeps records as bytes.
			got, err := DecodeStates(rec.Append(nil))
			if err != nil || !equalStates(got, rec) {
				t.Fatalf("%v %d: DecodeStates(Append(%+v)) = %+v, %v", lvl, start, rec, got, err)
			}
			recs[start] = got
		}
	}
}

// query answers [from, to) as the store would: the records of Cover's
// plan and the raw readings at its ends, merged in time order.
func (st *statesStore) query(t *testing.T, from, to, now int64, before Prior, readingAfter bool) TimeInState {
	p := Cover(from, to)
	type run struct {
		l Level // 0 for raw readings
		r Range
	}
	var runs []run
	for _, raw := range []Range{p.RawHead, p.RawTail} {
		if raw != (Range{}) {
			runs = append(runs, run{0, raw})
		}
	}
	for _, lr := range []struct {
		l  Level
		rs []Range
	}{{Minute, p.Minutes}, {Hour, p.Hours}, {Day, p.Days}} {
		for _, r := range lr.rs {
			runs = append(runs, run{lr.l, r})
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return cmp.Compare(a.r.From, b.r.From) })
	var all States
	for _, ru := range runs {
		if ru.l == 0 {
			if err := all.Merge(FromSamples(st.rawIn(ru.r))); err != nil {
				t.Fatalf("merge raw %+v: %v", ru.r, err)
			}
			continue
		}
		d := int64(ru.l.Duration())
		for s := ru.r.From; s < ru.r.To; s += d {
			if err := all.Merge(st.records[ru.l][s]); err != nil {
				t.Fatalf("merge %v %d: %v", ru.l, s, err)
			}
		}
	}
	got, err := all.TimeIn(StateQuery{From: from, To: to, Now: now, Before: before, ReadingAfter: readingAfter})
	if err != nil {
		t.Fatalf("TimeIn [%d, %d): %v", from, to, err)
	}
	return got
}

// rawIn returns the raw readings in r.
func (st *statesStore) rawIn(r Range) []Sample {
	var out []Sample
	for m := Minute.Truncate(r.From); m < r.To; m += int64(time.Minute) {
		for _, s := range st.raw[m] {
			if r.From <= s.TS && s.TS < r.To {
				out = append(out, s)
			}
		}
	}
	return out
}

// prior returns the state before from as the store finds it: the Last of
// the newest minute record before from's minute, then that of the raw
// readings of from's minute before from.
func (st *statesStore) prior(from int64) Prior {
	m := Minute.Truncate(from)
	var newest int64 = math.MinInt64
	for s := range st.records[Minute] {
		if s < m && s > newest {
			newest = s
		}
	}
	var p Prior
	if newest != math.MinInt64 {
		p = st.records[Minute][newest].Carry(p)
	}
	return FromSamples(st.rawIn(Range{m, from})).Carry(p)
}

// groupCarry returns the state after the group [from, to): that of the
// last reading in it, or before if it has none.
func (st *statesStore) groupCarry(from, to int64, before Prior) Prior {
	return FromSamples(st.rawIn(Range{from, to})).Carry(before)
}

func equalStates(a, b States) bool {
	return a.Count == b.Count && a.First == b.First && a.Last == b.Last && slices.Equal(a.PerState, b.PerState)
}

func equalTimeIn(a, b TimeInState) bool {
	return a.Count == b.Count && a.Unknown == b.Unknown && slices.Equal(a.PerState, b.PerState)
}

// TestStates_MatchesBruteForce is the property test of States: random
// series across minute, hour and day boundaries, with late readings, kept
// as minute records and rolled up into hours and days, queried over random
// ranges at a random now (whole minutes, or with raw readings at the
// ends), give exactly the counts, the time in each state and the unknown
// time computed from the raw readings; so do the ranges cut into
// consecutive groups, each with the state carried from the one before.
func TestStates_MatchesBruteForce(t *testing.T) {
	const minute = int64(time.Minute)
	t0 := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC).UnixNano()
	rebuilt, queries := 0, 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 35))
		readings := genReadings(rng, t0)
		st := newStatesStore()
		for _, r := range arrive(rng, readings) {
			st.add(t, r)
		}
		rebuilt += st.rebuilt
		st.rollUp(t)
		slices.SortFunc(readings, Sample.Compare)
		lastTS := readings[len(readings)-1].TS
		readingAfter := func(to int64) bool { return lastTS >= to }
		for q := range 60 {
			// From an hour before the series to a day after, at
			// most four days long.
			from := Minute.Truncate(t0) + (rng.Int64N(5*24*60)-60)*minute
			to := from + (1+rng.Int64N(4*24*60))*minute
			if rng.IntN(2) == 0 { // raw readings at either end
				from += rng.Int64N(minute)
				to += rng.Int64N(minute)
			}
			var now int64
			switch rng.IntN(4) {
			case 0: // after the range
				now = to + rng.Int64N(int64(time.Hour))
			case 1: // within the series
				now = readings[rng.IntN(len(readings))].TS + rng.Int64N(3) - 1
			default: // anywhere near the range
				now = from - int64(time.Hour) + rng.Int64N(to-from+2*int64(time.Hour))
			}
			name := fmt.Sprintf("seed %d query %d [%d, %d) now %d", seed, q, from, to, now)
			want := bruteTimeIn(readings, from, to, now)
			got := st.query(t, from, to, now, st.prior(from), readingAfter(to))
			if !equalTimeIn(got, want) {
				t.Fatalf("%s: got %+v, want %+v", name, got, want)
			}
			if now >= to {
				var total uint64 = got.Unknown
				for _, e := range got.PerState {
					total += e.Dur
				}
				if total != span(from, to) {
					t.Fatalf("%s: times add up to %d, want %d", name, total, span(from, to))
				}
			}
			queries++

			// Consecutive groups, as a query by minute, hour or day
			// would ask, each carrying the state of the one before.
			before := st.prior(from)
			for gFrom := from; gFrom < to; {
				gTo := min(to, gFrom+(1+rng.Int64N(180))*minute-rng.Int64N(minute))
				want := bruteTimeIn(readings, gFrom, gTo, now)
				got := st.query(t, gFrom, gTo, now, before, readingAfter(gTo))
				if !equalTimeIn(got, want) {
					t.Fatalf("%s, group [%d, %d): got %+v, want %+v", name, gFrom, gTo, got, want)
				}
				before = st.groupCarry(gFrom, gTo, before)
				gFrom = gTo
			}
		}
	}
	if rebuilt == 0 {
		t.Errorf("no late reading needed FromSamples: the test does not cover them")
	}
	t.Logf("%d queries, %d minute records built again for a late reading", queries, rebuilt)
}
