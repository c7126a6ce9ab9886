package aggregate

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"
)

const (
	minute = int64(time.Minute)
	hour   = int64(time.Hour)
	day    = 24 * hour
)

func TestCover(t *testing.T) {
	d0 := at(2026, 3, 14, 0, 0, 0, 0)
	for _, tc := range []struct {
		name     string
		from, to int64
		want     Plan
		records  int
	}{
		{name: "empty", from: d0, to: d0, want: Plan{}},
		{name: "reversed", from: d0 + 1, to: d0, want: Plan{}},
		{name: "reversed extremes", from: math.MaxInt64, to: math.MinInt64, want: Plan{}},
		{
			name: "inside one minute",
			from: at(2026, 3, 14, 10, 0, 5, 0), to: at(2026, 3, 14, 10, 0, 50, 0),
			want: Plan{RawHead: Range{at(2026, 3, 14, 10, 0, 5, 0), at(2026, 3, 14, 10, 0, 50, 0)}},
		},
		{
			name: "one nanosecond",
			from: d0, to: d0 + 1,
			want: Plan{RawHead: Range{d0, d0 + 1}},
		},
		{
			name: "across a minute boundary without a whole minute",
			from: at(2026, 3, 14, 10, 0, 30, 0), to: at(2026, 3, 14, 10, 1, 20, 0),
			want: Plan{RawHead: Range{at(2026, 3, 14, 10, 0, 30, 0), at(2026, 3, 14, 10, 1, 20, 0)}},
		},
		{
			name: "one whole minute",
			from: at(2026, 3, 14, 10, 7, 0, 0), to: at(2026, 3, 14, 10, 8, 0, 0),
			want:    Plan{Minutes: []Range{{at(2026, 3, 14, 10, 7, 0, 0), at(2026, 3, 14, 10, 8, 0, 0)}}},
			records: 1,
		},
		{
			name: "a minute and a nanosecond",
			from: at(2026, 3, 14, 10, 7, 0, 0), to: at(2026, 3, 14, 10, 8, 0, 1),
			want: Plan{
				Minutes: []Range{{at(2026, 3, 14, 10, 7, 0, 0), at(2026, 3, 14, 10, 8, 0, 0)}},
				RawTail: Range{at(2026, 3, 14, 10, 8, 0, 0), at(2026, 3, 14, 10, 8, 0, 1)},
			},
			records: 1,
		},
		{
			name: "days aligned",
			from: d0, to: d0 + 7*day,
			want:    Plan{Days: []Range{{d0, d0 + 7*day}}},
			records: 7,
		},
		{
			name: "one day aligned",
			from: d0, to: d0 + day,
			want:    Plan{Days: []Range{{d0, d0 + day}}},
			records: 1,
		},
		{
			name: "hours aligned within a day",
			from: at(2026, 3, 14, 6, 0, 0, 0), to: at(2026, 3, 14, 18, 0, 0, 0),
			want:    Plan{Hours: []Range{{at(2026, 3, 14, 6, 0, 0, 0), at(2026, 3, 14, 18, 0, 0, 0)}}},
			records: 12,
		},
		{
			// No whole hour: one run of minutes across the boundary.
			name: "just across an hour boundary",
			from: at(2026, 3, 14, 10, 58, 30, 0), to: at(2026, 3, 14, 11, 1, 15, 0),
			want: Plan{
				RawHead: Range{at(2026, 3, 14, 10, 58, 30, 0), at(2026, 3, 14, 10, 59, 0, 0)},
				Minutes: []Range{{at(2026, 3, 14, 10, 59, 0, 0), at(2026, 3, 14, 11, 1, 0, 0)}},
				RawTail: Range{at(2026, 3, 14, 11, 1, 0, 0), at(2026, 3, 14, 11, 1, 15, 0)},
			},
			records: 2,
		},
		{
			name: "across an hour boundary without a whole minute",
			from: at(2026, 3, 14, 10, 59, 30, 0), to: at(2026, 3, 14, 11, 0, 15, 0),
			want: Plan{RawHead: Range{at(2026, 3, 14, 10, 59, 30, 0), at(2026, 3, 14, 11, 0, 15, 0)}},
		},
		{
			name: "one whole hour with partial minutes",
			from: at(2026, 3, 14, 10, 58, 30, 0), to: at(2026, 3, 14, 12, 1, 15, 0),
			want: Plan{
				RawHead: Range{at(2026, 3, 14, 10, 58, 30, 0), at(2026, 3, 14, 10, 59, 0, 0)},
				Minutes: []Range{
					{at(2026, 3, 14, 10, 59, 0, 0), at(2026, 3, 14, 11, 0, 0, 0)},
					{at(2026, 3, 14, 12, 0, 0, 0), at(2026, 3, 14, 12, 1, 0, 0)},
				},
				Hours:   []Range{{at(2026, 3, 14, 11, 0, 0, 0), at(2026, 3, 14, 12, 0, 0, 0)}},
				RawTail: Range{at(2026, 3, 14, 12, 1, 0, 0), at(2026, 3, 14, 12, 1, 15, 0)},
			},
			records: 3,
		},
		{
			name: "every level",
			from: at(2026, 3, 14, 22, 58, 30, 0), to: at(2026, 3, 17, 1, 2, 15, 0),
			want: Plan{
				RawHead: Range{at(2026, 3, 14, 22, 58, 30, 0), at(2026, 3, 14, 22, 59, 0, 0)},
				Minutes: []Range{
					{at(2026, 3, 14, 22, 59, 0, 0), at(2026, 3, 14, 23, 0, 0, 0)},
					{at(2026, 3, 17, 1, 0, 0, 0), at(2026, 3, 17, 1, 2, 0, 0)},
				},
				Hours: []Range{
					{at(2026, 3, 14, 23, 0, 0, 0), at(2026, 3, 15, 0, 0, 0, 0)},
					{at(2026, 3, 17, 0, 0, 0, 0), at(2026, 3, 17, 1, 0, 0, 0)},
				},
				Days:    []Range{{at(2026, 3, 15, 0, 0, 0, 0), at(2026, 3, 17, 0, 0, 0, 0)}},
				RawTail: Range{at(2026, 3, 17, 1, 2, 0, 0), at(2026, 3, 17, 1, 2, 15, 0)},
			},
			records: 1 + 2 + 1 + 1 + 2,
		},
		{
			name: "days and right edge only",
			from: d0, to: d0 + 2*day + 3*hour + 4*minute + 5,
			want: Plan{
				Days:    []Range{{d0, d0 + 2*day}},
				Hours:   []Range{{d0 + 2*day, d0 + 2*day + 3*hour}},
				Minutes: []Range{{d0 + 2*day + 3*hour, d0 + 2*day + 3*hour + 4*minute}},
				RawTail: Range{d0 + 2*day + 3*hour + 4*minute, d0 + 2*day + 3*hour + 4*minute + 5},
			},
			records: 2 + 3 + 4,
		},
		{
			name: "across the epoch",
			from: at(1969, 12, 31, 23, 58, 30, 0), to: at(1970, 1, 1, 0, 1, 15, 0),
			want: Plan{
				RawHead: Range{-90 * 1e9, -60 * 1e9},
				Minutes: []Range{{-minute, minute}},
				RawTail: Range{minute, 75 * 1e9},
			},
			records: 2,
		},
		{
			name: "negative, every level",
			from: at(1969, 12, 29, 12, 30, 0, -1), to: at(1969, 12, 31, 5, 6, 7, 0),
			want: Plan{
				RawHead: Range{at(1969, 12, 29, 12, 30, 0, -1), at(1969, 12, 29, 12, 30, 0, 0)},
				Minutes: []Range{
					{at(1969, 12, 29, 12, 30, 0, 0), at(1969, 12, 29, 13, 0, 0, 0)},
					{at(1969, 12, 31, 5, 0, 0, 0), at(1969, 12, 31, 5, 6, 0, 0)},
				},
				Hours: []Range{
					{at(1969, 12, 29, 13, 0, 0, 0), at(1969, 12, 30, 0, 0, 0, 0)},
					{at(1969, 12, 31, 0, 0, 0, 0), at(1969, 12, 31, 5, 0, 0, 0)},
				},
				Days:    []Range{{at(1969, 12, 30, 0, 0, 0, 0), at(1969, 12, 31, 0, 0, 0, 0)}},
				RawTail: Range{at(1969, 12, 31, 5, 6, 0, 0), at(1969, 12, 31, 5, 6, 7, 0)},
			},
			records: 30 + 11 + 1 + 5 + 6,
		},
		{
			// A nanosecond short of a whole day: one run of hours.
			name: "negative, no whole day",
			from: at(1969, 12, 29, 12, 30, 0, -1), to: at(1969, 12, 31, 0, 0, 0, -1),
			want: Plan{
				RawHead: Range{at(1969, 12, 29, 12, 30, 0, -1), at(1969, 12, 29, 12, 30, 0, 0)},
				Minutes: []Range{
					{at(1969, 12, 29, 12, 30, 0, 0), at(1969, 12, 29, 13, 0, 0, 0)},
					{at(1969, 12, 30, 23, 0, 0, 0), at(1969, 12, 30, 23, 59, 0, 0)},
				},
				Hours:   []Range{{at(1969, 12, 29, 13, 0, 0, 0), at(1969, 12, 30, 23, 0, 0, 0)}},
				RawTail: Range{at(1969, 12, 30, 23, 59, 0, 0), at(1969, 12, 31, 0, 0, 0, -1)},
			},
			records: 30 + 34 + 59,
		},
		{
			name: "whole int64 range",
			from: math.MinInt64, to: math.MaxInt64,
			want: Plan{
				RawHead: Range{math.MinInt64, at(1677, 9, 21, 0, 13, 0, 0)},
				Minutes: []Range{
					{at(1677, 9, 21, 0, 13, 0, 0), at(1677, 9, 21, 1, 0, 0, 0)},
					{at(2262, 4, 11, 23, 0, 0, 0), at(2262, 4, 11, 23, 47, 0, 0)},
				},
				Hours: []Range{
					{at(1677, 9, 21, 1, 0, 0, 0), at(1677, 9, 22, 0, 0, 0, 0)},
					{at(2262, 4, 11, 0, 0, 0, 0), at(2262, 4, 11, 23, 0, 0, 0)},
				},
				Days:    []Range{{at(1677, 9, 22, 0, 0, 0, 0), at(2262, 4, 11, 0, 0, 0, 0)}},
				RawTail: Range{at(2262, 4, 11, 23, 47, 0, 0), math.MaxInt64},
			},
			// 213,502 days, from 1677-09-22 to 2262-04-11.
			records: 47 + 23 + 213502 + 23 + 47,
		},
		{
			name: "last nanoseconds",
			from: math.MaxInt64 - 10, to: math.MaxInt64,
			want: Plan{RawHead: Range{math.MaxInt64 - 10, math.MaxInt64}},
		},
		{
			name: "first nanoseconds",
			from: math.MinInt64, to: math.MinInt64 + 10,
			want: Plan{RawHead: Range{math.MinInt64, math.MinInt64 + 10}},
		},
		{
			name: "last whole minute",
			from: at(2262, 4, 11, 23, 46, 0, 0), to: math.MaxInt64,
			want: Plan{
				Minutes: []Range{{at(2262, 4, 11, 23, 46, 0, 0), at(2262, 4, 11, 23, 47, 0, 0)}},
				RawTail: Range{at(2262, 4, 11, 23, 47, 0, 0), math.MaxInt64},
			},
			records: 1,
		},
		{
			name: "first whole minute",
			from: math.MinInt64, to: at(1677, 9, 21, 0, 14, 0, 0),
			want: Plan{
				RawHead: Range{math.MinInt64, at(1677, 9, 21, 0, 13, 0, 0)},
				Minutes: []Range{{at(1677, 9, 21, 0, 13, 0, 0), at(1677, 9, 21, 0, 14, 0, 0)}},
			},
			records: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cover(tc.from, tc.to)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Cover(%d, %d):\ngot  %+v\nwant %+v", tc.from, tc.to, got, tc.want)
			}
			if n := got.Records(); n != tc.records {
				t.Errorf("Records: got %d, want %d", n, tc.records)
			}
			checkPlan(t, tc.from, tc.to, got)
		})
	}
}

// TestCover_Random checks the properties of the plans of random ranges,
// from minutes to the whole int64 range, with their ends often on or next
// to a boundary.
func TestCover_Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	anchor := at(2026, 1, 1, 0, 0, 0, 0)
	span := func(max int64) int64 { return rng.Int64N(max + 1) }
	for i := range 3000 {
		var from, to int64
		switch i % 6 {
		case 0: // within two days of each other
			from = snap(rng, anchor+span(10*365*day)-5*365*day)
			to = snap(rng, from+span(2*day))
		case 1: // spanning up to three years
			from = snap(rng, anchor+span(10*365*day)-5*365*day)
			to = snap(rng, from+span(3*365*day))
		case 2: // around the epoch
			from = snap(rng, span(4*day)-2*day)
			to = snap(rng, span(4*day)-2*day)
		case 3: // at the low end of the int64 range
			from = math.MinInt64 + span(3*day)
			to = snap(rng, from+span(3*day))
		case 4: // at the high end
			to = math.MaxInt64 - span(3*day)
			from = snap(rng, to-span(3*day))
		case 5: // anywhere; the walk is long, so only a few
			if i%60 != 5 {
				continue
			}
			from, to = int64(rng.Uint64()), int64(rng.Uint64())
		}
		checkPlan(t, from, to, Cover(from, to))
	}
}

// snap moves ts, at random, onto a minute, hour or day boundary near it, or
// one nanosecond off it, or leaves it.
func snap(rng *rand.Rand, ts int64) int64 {
	l := Level(rng.IntN(4))
	if l == 0 || ts < math.MinInt64+day || ts > math.MaxInt64-day {
		return ts
	}
	return l.Truncate(ts) + int64(rng.IntN(3)-1)
}

// TestCover_AllPairs checks the plans of every pair of instants from a set
// made of instants at, and next to, boundaries of every level around one
// day, and of the ends of the int64 range.
func TestCover_AllPairs(t *testing.T) {
	d0 := at(2026, 3, 14, 0, 0, 0, 0)
	var instants []int64
	for _, d := range []int64{-day, 0, day, 2 * day} {
		for _, h := range []int64{0, hour, 23 * hour} {
			for _, m := range []int64{0, minute, 59 * minute} {
				for _, ns := range []int64{-1, 0, 1, 30e9} {
					instants = append(instants, d0+d+h+m+ns)
				}
			}
		}
	}
	firstMinute, firstHour, firstDay := at(1677, 9, 21, 0, 13, 0, 0), at(1677, 9, 21, 1, 0, 0, 0), at(1677, 9, 22, 0, 0, 0, 0)
	lastMinute, lastHour, lastDay := at(2262, 4, 11, 23, 47, 0, 0), at(2262, 4, 11, 23, 0, 0, 0), at(2262, 4, 11, 0, 0, 0, 0)
	for _, ts := range []int64{firstMinute, firstHour, firstDay, lastMinute, lastHour, lastDay} {
		instants = append(instants, ts-1, ts, ts+1)
	}
	instants = append(instants, math.MinInt64, math.MinInt64+1, math.MaxInt64-1, math.MaxInt64)
	slices.Sort(instants)
	instants = slices.Compact(instants)
	for _, from := range instants {
		for _, to := range instants {
			checkPlan(t, from, to, Cover(from, to))
		}
	}
	t.Logf("%d instants, %d pairs", len(instants), len(instants)*len(instants))
}

// FuzzCover checks the properties of the plan of any range.
func FuzzCover(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(at(2026, 3, 14, 22, 58, 30, 0), at(2026, 3, 17, 1, 2, 15, 0))
	f.Add(int64(math.MinInt64), int64(math.MaxInt64))
	f.Add(int64(-1), int64(minute))
	f.Fuzz(func(t *testing.T, from, to int64) {
		checkPlan(t, from, to, Cover(from, to))
	})
}

// TestCover_RecordsBound bounds the records a range of up to 30 days needs.
// The worst case is a range that just misses day boundaries at both ends:
// 59 minutes and 23 hours on each side of 28 days, 192 records.
func TestCover_RecordsBound(t *testing.T) {
	const month = 30 * day
	rng := rand.New(rand.NewPCG(11, 12))
	anchor := at(2026, 1, 1, 0, 0, 0, 0)
	maxAny, maxExact := 0, 0
	for range 100000 {
		from := snap(rng, anchor+rng.Int64N(365*day))
		n := Cover(from, from+rng.Int64N(month+1)).Records()
		maxAny = max(maxAny, n)
		maxExact = max(maxExact, Cover(from, from+month).Records())
	}
	worst := Cover(anchor+1, anchor+month-1)
	if got, want := worst.Records(), 2*(59+23)+28; got != want {
		t.Errorf("worst case: got %d records, want %d", got, want)
	}
	maxAny = max(maxAny, worst.Records())
	if maxAny >= 200 {
		t.Errorf("got %d records for a range of at most 30 days, want < 200", maxAny)
	}
	t.Logf("records for a range of at most 30 days: max %d; of exactly 30 days: max %d", maxAny, maxExact)

	year := Cover(at(2025, 1, 1, 0, 0, 0, 0), at(2026, 1, 1, 0, 0, 0, 0))
	if got, want := year.Records(), 365; got != want || len(year.Days) != 1 || len(year.Hours)+len(year.Minutes) != 0 {
		t.Errorf("year 2025: got %d records (%+v), want %d days", got, year, want)
	}
	maxYear := 0
	for range 10000 {
		from := anchor + rng.Int64N(365*day)
		maxYear = max(maxYear, Cover(from, from+365*day).Records())
	}
	t.Logf("records for year 2025: %d; for any 365 days: max %d", year.Records(), maxYear)
}

// BenchmarkCover plans ranges of every shape.
func BenchmarkCover(b *testing.B) {
	d0 := at(2026, 3, 14, 0, 0, 0, 0)
	for _, bc := range []struct {
		name     string
		from, to int64
	}{
		{"within a minute", d0 + 1e9, d0 + 2e9},
		{"hours", d0 + 3*hour, d0 + 9*hour},
		{"30 days, every level", d0 + 1, d0 + 30*day - 1},
		{"int64 range", math.MinInt64, math.MaxInt64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Cover(bc.from, bc.to)
			}
		})
	}
}

// piece is a part of a cover: a run of whole records of a Level, or raw
// readings (level 0).
type piece struct {
	level Level
	r     Range
}

// checkPlan fails t unless p is a minimal exact cover of [from, to), the
// Plan Cover documents.
func checkPlan(t testing.TB, from, to int64, p Plan) {
	t.Helper()
	if from >= to {
		if !reflect.DeepEqual(p, Plan{}) {
			t.Fatalf("Cover(%d, %d): got %+v, want the zero Plan", from, to, p)
		}
		return
	}
	var all []piece
	records := 0
	for _, lr := range []struct {
		l       Level
		runs    []Range
		maxRuns int
	}{{Minute, p.Minutes, 2}, {Hour, p.Hours, 2}, {Day, p.Days, 1}} {
		if len(lr.runs) > lr.maxRuns || lr.runs != nil && len(lr.runs) == 0 {
			t.Fatalf("Cover(%d, %d): got %d %v runs %v, want nil or up to %d", from, to, len(lr.runs), lr.l, lr.runs, lr.maxRuns)
		}
		d := int64(lr.l.Duration())
		for i, r := range lr.runs {
			if r.From >= r.To || r.From%d != 0 || r.To%d != 0 {
				t.Fatalf("Cover(%d, %d): got %v run %v, want it non-empty and aligned", from, to, lr.l, r)
			}
			if i > 0 && lr.runs[i-1].To >= r.From {
				t.Fatalf("Cover(%d, %d): got %v runs %v, want them ordered and apart", from, to, lr.l, lr.runs)
			}
			if lr.l < Day && holdsWhole(r, lr.l+1) {
				t.Fatalf("Cover(%d, %d): got %v run %v holding a whole %v", from, to, lr.l, r, lr.l+1)
			}
			all = append(all, piece{lr.l, r})
			records += int(uint64(r.To-r.From) / uint64(d))
		}
	}
	for _, raw := range []struct {
		name string
		r    Range
		end  int64
		at   int64
	}{{"RawHead", p.RawHead, from, p.RawHead.From}, {"RawTail", p.RawTail, to, p.RawTail.To}} {
		if raw.r == (Range{}) {
			continue
		}
		if raw.r.From >= raw.r.To || raw.at != raw.end || holdsWhole(raw.r, Minute) {
			t.Fatalf("Cover(%d, %d): got %s %v, want it non-empty, at %d, without a whole minute", from, to, raw.name, raw.r, raw.end)
		}
		all = append(all, piece{0, raw.r})
	}
	if p.RawTail != (Range{}) && records == 0 {
		t.Fatalf("Cover(%d, %d): got RawHead %v and RawTail %v only, want one RawHead", from, to, p.RawHead, p.RawTail)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].r.From < all[j].r.From })
	next := from
	for _, pc := range all {
		if pc.r.From != next {
			t.Fatalf("Cover(%d, %d): got %+v, a gap or an overlap at %d", from, to, p, next)
		}
		next = pc.r.To
	}
	if next != to {
		t.Fatalf("Cover(%d, %d): got %+v, covering up to %d", from, to, p, next)
	}
	if got := p.Records(); got != records {
		t.Fatalf("Cover(%d, %d).Records(): got %d, want %d", from, to, got, records)
	}
	if want := walkCover(from, to); !slices.Equal(joined(all), want) {
		t.Fatalf("Cover(%d, %d): got pieces %v, want %v", from, to, joined(all), want)
	}
}

// holdsWhole reports whether r holds a whole record of l.
func holdsWhole(r Range, l Level) bool {
	d := int64(l.Duration())
	return ceilDiv(r.From, d) < floorDiv(r.To, d)
}

// walkCover is the minimal cover of [from, to), found another way: walking
// from from and taking at each instant the coarsest whole record that
// starts there and fits, else raw readings up to the next minute or to
// (days all at once, the walk would take them one after the other). It
// returns the pieces joined, as joined does.
func walkCover(from, to int64) []piece {
	var ps []piece
	for ts := from; ts < to; {
		left := uint64(to - ts) // may exceed math.MaxInt64
		next := piece{}
		for _, l := range []Level{Day, Hour, Minute} {
			d := uint64(l.Duration())
			if mod(ts, int64(d)) == 0 && left >= d {
				n := uint64(1)
				if l == Day {
					n = left / d
				}
				// n·d ≤ left: the wrapping sum is exact.
				next = piece{l, Range{ts, ts + int64(n*d)}}
				break
			}
		}
		if next.level == 0 {
			end := to
			if step := uint64(minute - mod(ts, minute)); step < left {
				end = ts + int64(step)
			}
			next = piece{0, Range{ts, end}}
		}
		ps = append(ps, next)
		ts = next.r.To
	}
	return joined(ps)
}

// joined returns ps, which are in time order, with adjacent pieces of one
// level made one.
func joined(ps []piece) []piece {
	var out []piece
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].level == p.level && out[n-1].r.To == p.r.From {
			out[n-1].r.To = p.r.To
			continue
		}
		out = append(out, p)
	}
	return out
}

// mod returns ts modulo d in [0, d).
func mod(ts, d int64) int64 {
	r := ts % d
	if r < 0 {
		r += d
	}
	return r
}
