package buffer

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Open points are stored in runs. A checkpoint of the journal (journal.go)
// writes the new readings of a series-day as one run (more when there are
// more than runMax): one point key, that of the run's first sample, whose
// value is the run's samples encoded as a bucket, or empty for a run of one
// reading. A busy series thus costs one key per checkpoint instead of one
// per reading, and sealing it deletes a few runs instead of every reading.
//
// Runs of a series-day may overlap in time. In memory, a series keeps the
// open samples of each day run after run (seriesState.open), each run
// sorted, with the length of each run (seriesState.runs), so that what
// removes open points (sealing, retention, repair) knows the runs it
// deletes and the runs it must write again for the points they keep.

// runSampleMax is the most bytes a sample takes in a run's value, at
// worst, and runHeaderMax the most its header takes.
const (
	runSampleMax = 20
	runHeaderMax = 64
)

// runMax returns the most samples a run holds: a bucket's worth at most, and
// no more than fit in a value the store takes, at worst.
func (s *Store) runMax() int {
	return max(1, min(MaxBucketSamples, (s.maxValue-runHeaderMax)/runSampleMax))
}

// runEntry returns the key and value of a run of sorted samples.
func runEntry(st *seriesState, run []Sample) (kv, error) {
	key := appendPointKey(nil, Reading{Device: st.device, Metric: st.metric, TS: run[0].TS, Value: run[0].Value})
	if len(run) == 1 {
		return kv{key: key}, nil
	}
	val, err := appendBucket(nil, run)
	if err != nil {
		return kv{}, fmt.Errorf("run %q: %w", key, err)
	}
	return kv{key: key, value: val}, nil
}

// decodeRun appends to dst the samples of the run with value v stored under
// the point key of first (parsePointTail), after checking that the run
// starts with first.
func decodeRun(dst []Sample, first Sample, v []byte) ([]Sample, error) {
	if len(v) == 0 {
		return append(dst, first), nil
	}
	start := len(dst)
	dst, err := decodeBucket(dst, v)
	if err != nil {
		return dst[:start], err
	}
	if len(dst) == start || !dst[start].same(first) {
		return dst[:start], errors.New("its first sample is not its key's")
	}
	return dst, nil
}

// forRuns calls fn with the runs a commit writes for samples sorted by
// compareSamples: those of each UTC day, at most limit to a run.
func forRuns(samples []Sample, limit int, fn func(day int32, run []Sample) error) error {
	for len(samples) > 0 {
		day := dayOf(samples[0].TS)
		n := 1
		for n < len(samples) && n < limit && dayOf(samples[n].TS) == day {
			n++
		}
		if err := fn(day, samples[:n]); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}

// runChange is what removing points from one run takes: deleting the run
// (unless the points it keeps are written under the same key) and writing
// the points it keeps as a new run.
type runChange struct {
	old     []byte // the run's key
	removed int    // points removed
	keep    kv     // the run of the points kept (key nil: none)
}

// openEdit is the plan of removing some open points of a series-day.
type openEdit struct {
	st      *seriesState
	day     int32
	changes []runChange
	open    []Sample // the day's open points after
	runs    []uint16 // and its runs
	removed int
}

// planDrop plans removing the open points of a series-day for which drop
// reports true. It changes nothing; apply does, once the plan is
// committed.
func (st *seriesState) planDrop(day int32, drop func(Sample) bool) (openEdit, error) {
	e := openEdit{st: st, day: day}
	open := st.open[day]
	off := 0
	for _, l := range st.runs[day] {
		n := int(l)
		run := open[off : off+n]
		off += n
		start := len(e.open)
		for _, p := range run {
			if !drop(p) {
				e.open = append(e.open, p)
			}
		}
		kept := e.open[start:]
		if len(kept) == n {
			e.runs = append(e.runs, l)
			continue
		}
		c := runChange{old: appendPointKey(nil, Reading{Device: st.device, Metric: st.metric, TS: run[0].TS, Value: run[0].Value}), removed: n - len(kept)}
		if len(kept) > 0 {
			var err error
			if c.keep, err = runEntry(st, kept); err != nil {
				return openEdit{}, err
			}
			e.runs = append(e.runs, uint16(len(kept)))
		}
		e.changes = append(e.changes, c)
		e.removed += c.removed
	}
	return e, nil
}

// dels appends the keys the edit deletes to dst.
func (e *openEdit) dels(dst [][]byte) [][]byte {
	for _, c := range e.changes {
		if c.keep.key == nil || !bytes.Equal(c.keep.key, c.old) {
			dst = append(dst, c.old)
		}
	}
	return dst
}

// sets appends the runs the edit writes to dst.
func (e *openEdit) sets(dst []kv) []kv {
	for _, c := range e.changes {
		if c.keep.key != nil {
			dst = append(dst, c.keep)
		}
	}
	return dst
}

// apply brings the series' open points up to date with the committed edit.
func (e *openEdit) apply() {
	if len(e.open) == 0 {
		delete(e.st.open, e.day)
		delete(e.st.runs, e.day)
		return
	}
	e.st.open[e.day], e.st.runs[e.day] = e.open, e.runs
}

// addRun adds a committed run of sorted samples to the open points of its
// day.
func (st *seriesState) addRun(day int32, run []Sample) {
	st.open[day] = append(st.open[day], run...)
	st.runs[day] = append(st.runs[day], uint16(len(run))) // a bucket's worth at most
}

// hasOpen reports whether the sample is an open point of the series, in
// the journal, or one of the commit under way.
func (st *seriesState) hasOpen(smp Sample) bool {
	return slices.ContainsFunc(st.open[dayOf(smp.TS)], smp.same) ||
		slices.ContainsFunc(st.unflushed, smp.same) || slices.ContainsFunc(st.pend, smp.same)
}
