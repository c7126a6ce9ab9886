package aggregate

// Range is the half-open time range [From, To), in nanoseconds since the
// epoch. It is empty if From >= To; the zero Range is empty.
type Range struct{ From, To int64 }

// Plan is the cover of a time range by the fewest Stats records: whole
// days in the middle, whole hours on either side of them, whole minutes on
// either side of those, and the raw readings of the partial minutes at the
// two ends. The Stats of the range is the Merge of the Stats of every
// record of Minutes, Hours and Days and of every raw reading in RawHead and
// RawTail.
//
// The ranges of a Plan are non-empty (but for an unused RawHead or
// RawTail, which is the zero Range), pairwise disjoint, and their union is
// exactly the range planned. Each Range of Minutes, Hours and Days is a
// contiguous run of whole records of that Level: its From and To are
// multiples of the Level's Duration, and its records start at From, From +
// Duration, … up to but excluding To (the steps do not overflow). Each
// slice is in time order, nil when the level has no record, and holds at
// most two runs: one left and one right of the coarser records, or one
// when the level is the coarsest with a whole record in the range. Days
// holds at most one run.
type Plan struct {
	// RawHead and RawTail are the ranges at the ends left to raw readings:
	// RawHead starts at the range's start, RawTail ends at its end, and
	// neither holds a whole minute. A range holding no whole minute is all
	// RawHead.
	RawHead, RawTail Range
	// Minutes, Hours and Days are the runs of whole records of each Level.
	Minutes, Hours, Days []Range
}

// Cover returns the Plan of the half-open range [from, to), which uses the
// fewest Stats records of any exact cover by whole records and raw
// readings at the ends. It returns the zero Plan if from >= to.
//
// Cover is exact over the whole int64 range and does not overflow: it
// never plans a record that starts before math.MinInt64 or ends after
// math.MaxInt64, and covers the partial records at the ends of the int64
// range with finer ones and raw readings like any other. As to is
// excluded, math.MaxInt64 itself is never covered.
func Cover(from, to int64) Plan {
	if from >= to {
		return Plan{}
	}
	levels := [...]Level{Day, Hour, Minute}
	var (
		runs    [5]Range         // 1 run of the coarsest level used, 2 of each finer one
		perLvl  [len(levels)]int // runs of levels[i]
		nruns   int
		lo, hi  int64 // the part covered by coarser levels: [lo, hi)
		started bool  // whether a coarser level has a record
	)
	add := func(i int, r Range) {
		runs[nruns] = r
		nruns++
		perLvl[i]++
	}
	for i, l := range levels {
		d := int64(l.Duration())
		// The whole records of l in [from, to) are those k with
		// a ≤ k < b. Their bounds k·d lie in [from, to] and so do not
		// overflow; a·d and b·d are only computed when they are such
		// bounds.
		a, b := ceilDiv(from, d), floorDiv(to, d)
		if !started {
			if a < b {
				lo, hi = a*d, b*d
				add(i, Range{lo, hi})
				started = true
			}
			continue
		}
		// lo and hi are multiples of d, so from ≤ a·d ≤ lo and
		// hi ≤ b·d ≤ to.
		if left := a * d; left < lo {
			add(i, Range{left, lo})
			lo = left
		}
		if right := b * d; right > hi {
			add(i, Range{hi, right})
			hi = right
		}
	}
	if !started {
		return Plan{RawHead: Range{from, to}}
	}
	var p Plan
	if from < lo {
		p.RawHead = Range{from, lo}
	}
	if hi < to {
		p.RawTail = Range{hi, to}
	}
	// One allocation for the runs of every level.
	all := make([]Range, nruns)
	copy(all, runs[:nruns])
	take := func(k int) []Range {
		if k == 0 {
			return nil
		}
		s := all[:k:k]
		all = all[k:]
		return s
	}
	p.Days = take(perLvl[0])
	p.Hours = take(perLvl[1])
	p.Minutes = take(perLvl[2])
	return p
}

// Records returns the number of Stats records in p: the whole minutes,
// hours and days of its runs. Raw readings are not counted.
func (p Plan) Records() int {
	n := 0
	for _, lr := range [...]struct {
		l    Level
		runs []Range
	}{{Minute, p.Minutes}, {Hour, p.Hours}, {Day, p.Days}} {
		d := uint64(lr.l.Duration())
		for _, r := range lr.runs {
			// To-From may exceed math.MaxInt64 but never 2⁶⁴-1.
			n += int(uint64(r.To-r.From) / d)
		}
	}
	return n
}
