package buffer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The latest reading of a series is not kept apart in memory: a series
// costs its bytes for as long as the store holds it
// (BenchmarkSeriesMemory). The index knows the newest timestamp of each
// series (seriesState.last), and the reading at that time is most often
// one the running Writer holds anyway: in the journal (unflushed) or
// among the open points of its day. latest asks the Writer for those on
// its goroutine, and reads only the others, which are then in sealed
// buckets or open runs on disk, through the queries' own path. It does
// not checkpoint the journal: a dashboard or a Prometheus scrape that
// reads the latest readings every few seconds costs no write.

// Latest returns the newest reading of each series of the devices named,
// with its unit (Reading.Unit, "" when not known), sorted by device, then
// metric. A series whose raw readings retention has removed has none. Of
// two readings with the newest timestamp, it returns the one a query
// newest first returns first, wherever they are stored.
func (s *Store) Latest(devices ...string) ([]Reading, error) {
	if len(devices) == 0 {
		return nil, nil
	}
	want := make(map[string]bool, len(devices))
	for _, d := range devices {
		want[d] = true
	}
	return s.latest(func(device, _ string) bool { return want[device] })
}

// LatestAll returns the newest reading of every series of the store, as
// Latest does for some devices.
func (s *Store) LatestAll() ([]Reading, error) {
	return s.latest(func(string, string) bool { return true })
}

// LatestFunc returns the newest reading of each series for which keep
// reports true, as Latest does for some devices; it reads only those.
// keep is called with the index of series locked: it must not call the
// store.
func (s *Store) LatestFunc(keep func(device, metric string) bool) ([]Reading, error) {
	return s.latest(keep)
}

// latestItem is a series whose newest reading latest looks for: r has
// its device, metric, unit and newest timestamp, and its value once
// found.
type latestItem struct {
	st     *seriesState
	texts  []string // the series' dictionary, nil for a number series (text.go)
	r      Reading
	found  bool
	sealed bool // not found in memory; the newest timestamp is in a sealed bucket
}

// latest returns the newest reading of each series that is wanted.
func (s *Store) latest(wanted func(device, metric string) bool) ([]Reading, error) {
	var items []latestItem
	s.mu.RLock()
	for _, st := range s.series {
		if st.last != math.MinInt64 && wanted(st.device, st.metric) {
			it := latestItem{st: st, r: Reading{Device: st.device, Metric: st.metric, TS: st.last, Unit: st.unitName()}}
			if d := s.texts[st]; d != nil {
				it.texts = d.texts[:len(d.texts):len(d.texts)]
			}
			items = append(items, it)
		}
	}
	s.mu.RUnlock()
	if len(items) == 0 {
		return nil, nil
	}
	slices.SortFunc(items, func(a, b latestItem) int {
		if c := strings.Compare(a.r.Device, b.r.Device); c != 0 {
			return c
		}
		return strings.Compare(a.r.Metric, b.r.Metric)
	})
	if w := s.runningWriter(); w != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		err := w.latest(ctx, items)
		cancel()
		if err != nil { // ErrClosed while the Writer stops
			return nil, fmt.Errorf("latest readings: %w", err)
		}
	}
	out := make([]Reading, 0, len(items))
	err := s.db.View(func(txn *badger.Txn) error {
		for _, it := range items {
			if it.found {
				withText(&it.r, it.texts)
				out = append(out, it.r)
				continue
			}
			if it.sealed {
				smp, ok, err := s.sealedAt(txn, it.r)
				if err != nil {
					return err
				}
				if ok {
					it.r.Value = smp.Value
					withText(&it.r, it.texts)
					out = append(out, it.r)
					continue
				}
			}
			got, ok, err := s.latestOf(txn, it.r)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, got)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("latest readings: %w", err)
	}
	return out, nil
}

// latest finds, on the Writer's goroutine, the newest reading of each
// item's series among the points the Writer holds: those in the journal
// and the open ones of its newest day. It updates each item's timestamp
// to the series' newest, which may have moved since the item was made.
// An item it does not find has its newest reading on disk only (in a
// sealed bucket, which it marks, or an open run), or none left.
func (w *Writer) latest(ctx context.Context, items []latestItem) error {
	return w.do(ctx, func() error {
		for i := range items {
			it := &items[i]
			it.r.TS = it.st.last // the Writer's goroutine alone writes it
			if smp, ok := it.st.pointAt(it.r.TS); ok {
				it.r.Value, it.found = smp.Value, true
			} else {
				it.sealed = it.st.sealedLast == it.r.TS
			}
		}
		return nil
	})
}

// pointAt returns the point at ts that the series holds in memory, in
// the journal or among the open points of its day. Of several, it is the
// greatest by Sample.Less, as a query newest first, a bucket and a
// checkpoint's sorted runs order them, so that the answer does not change
// when the journal is checkpointed or the day sealed.
func (st *seriesWork) pointAt(ts int64) (Sample, bool) {
	best, found := Sample{}, false
	for _, pts := range [][]Sample{st.unflushed, st.points(encoding.DayOf(ts))} {
		for _, p := range pts {
			if p.TS == ts && (!found || best.Less(p)) {
				best, found = p, true
			}
		}
	}
	return best, found
}

// sealedAt returns the sample at r.TS of the sealed bucket of r's series
// that holds r.TS, the greatest of them if several (Sample.Less): one bucket read, where a
// query would also step over the open points that sealing deleted.
func (s *Store) sealedAt(txn *badger.Txn, r Reading) (Sample, bool, error) {
	// The bucket whose first sample is the last at or before any sample at
	// r.TS: its key's value is the highest there is.
	at := Sample{TS: r.TS, Value: math.Float64frombits(math.MaxUint64)}
	samples, err := s.bucketHolding(txn, r.Device, r.Metric, at)
	if err != nil {
		return Sample{}, false, err
	}
	for i := len(samples) - 1; i >= 0; i-- {
		if samples[i].TS == r.TS {
			return samples[i], true, nil
		}
	}
	return Sample{}, false, nil
}

// latestOf reads the newest reading of r's series within txn, where it
// is not in the journal: the one at r.TS, the series' newest timestamp.
// If that one is gone (retention removed it meanwhile), it is the newest
// left. It reports whether the series has one.
func (s *Store) latestOf(txn *badger.Txn, r Reading) (Reading, bool, error) {
	q := Query{Device: r.Device, Metric: r.Metric, From: r.TS, To: r.TS + 1, Desc: true, Limit: 1}
	if r.TS == math.MaxInt64 { // no query names the last nanosecond
		q.To = r.TS
	}
	got, ok := Reading{}, false
	take := func(rd Reading) bool {
		rd.Unit = r.Unit
		got, ok = rd, true
		return false
	}
	if err := s.scan(txn, nil, q, []string{q.Metric}, take); err != nil || ok {
		return got, ok, err
	}
	q.From, q.To = math.MinInt64, math.MaxInt64
	err := s.scan(txn, nil, q, []string{q.Metric}, take)
	return got, ok, err
}
