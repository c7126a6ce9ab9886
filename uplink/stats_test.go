package uplink

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

// put stores rs in s.
func (s *store) put(t *testing.T, rs ...buffer.Reading) {
	t.Helper()
	ch := make(chan buffer.Result, 1)
	if err := s.w.Submit(context.Background(), rs, func(r buffer.Result) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	if res := <-ch; res.Err != nil || res.Stored != len(rs) {
		t.Fatalf("store %d readings: %+v", len(rs), res)
	}
}

// statsLine is the line protocol line of the minute record of device and
// metric at start, as the store holds it now.
func statsLine(t *testing.T, s *store, device, metric string, start int64) string {
	t.Helper()
	return groupLine(t, s, aggregate.Minute, device, metric, start)
}

// groupLine is statsLine for the records of group.
func groupLine(t *testing.T, s *store, group aggregate.Level, device, metric string, start int64) string {
	t.Helper()
	recs, _, err := s.StatsByLevel(device, metric, group, start, start+int64(group.Duration()))
	if err != nil || len(recs) != 1 {
		t.Fatalf("stats of %s/%s at %d: %v, %v", device, metric, start, recs, err)
	}
	st := recs[0].Stats
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return fmt.Sprintf("readings_stats,device=%s,gateway=gw,group=%s,metric=%s count=%di,sum=%s,min=%s,max=%s,mean=%s %d",
		device, group, metric, st.Count, f(st.Sum), f(st.Min), f(st.Max), f(st.Mean()), start)
}

// TestStats_WaitsForThePeriodToClose runs a data: stats uplink on a real
// store with a clock of the test's: the records of a closed minute go at
// once, one line each; the readings of the open minute wait, and so does
// a late reading of the closed minute stored behind them; once the clock
// passes the open minute's end and the grace, its records go, and the
// closed minute's again, with the late reading. A reading stamped further
// ahead than a minute holds nothing back.
func TestStats_WaitsForThePeriodToClose(t *testing.T) {
	s := openStore(t, t.TempDir())
	up := newUpstream(t)
	minute := int64(time.Minute)
	m0 := testEpoch - testEpoch%minute // closed
	m1 := m0 + minute                  // open
	var now atomic.Int64
	now.Store(m1 + 30*int64(time.Second))
	u, err := New(s, Options{URL: up.srv.URL, Gateway: "gw", Interval: 10 * time.Millisecond,
		Data: Stats, Group: aggregate.Minute, Stats: s.Store, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	r := func(device, metric string, ts int64, v float64) buffer.Reading {
		return buffer.Reading{Device: device, Metric: metric, TS: ts, Value: v}
	}
	s.put(t, r("a", "t", m0+1e9, 20), r("a", "t", m0+2e9, 22), r("b", "t", m0+3e9, -1))
	s.put(t, r("a", "t", m1+1e9, 21), r("b", "t", m1+2e9, 5))
	runUplink(t, u)

	waitFor(t, "the closed minute's records", func() bool { _, lines := up.received(); return len(lines) >= 2 })
	_, lines := up.received()
	wantEarly := []string{
		"readings_stats,device=a,gateway=gw,group=minute,metric=t count=2i,sum=42,min=20,max=22,mean=21 " + strconv.FormatInt(m0, 10),
		"readings_stats,device=b,gateway=gw,group=minute,metric=t count=1i,sum=-1,min=-1,max=-1,mean=-1 " + strconv.FormatInt(m0, 10),
	}
	if !slices.Equal(lines, wantEarly) {
		t.Errorf("first batch: got\n%q\nwant\n%q", lines, wantEarly)
	}
	s.put(t, r("a", "t", m0+50e9, 10)) // late, behind the open minute
	if st := u.Status(); st.PendingReadings != 3 || st.SentReadings != 3 {
		t.Errorf("while the minute is open: %d readings pending, %d sent; want 3 and 3", st.PendingReadings, st.SentReadings)
	}

	now.Store(m1 + minute + int64(statsGrace))
	waitFor(t, "the second batch", func() bool { return u.Status().PendingReadings == 0 })
	_, lines = up.received()
	// In order of device, metric and start.
	want := append(wantEarly, statsLine(t, s, "a", "t", m0), statsLine(t, s, "a", "t", m1), statsLine(t, s, "b", "t", m1))
	if !slices.Equal(lines, want) {
		t.Errorf("after the minute closed: got\n%q\nwant\n%q", lines, want)
	}

	// Five minutes ahead of the clock: goes at once, although open.
	ahead := m1 + 6*minute
	s.put(t, r("c", "t", ahead, 7))
	waitFor(t, "the reading ahead", func() bool { return u.Status().PendingReadings == 0 })
	_, lines = up.received()
	if got, want := lines[len(lines)-1], statsLine(t, s, "c", "t", ahead-ahead%minute); got != want {
		t.Errorf("ahead: got %q, want %q", got, want)
	}
}

// TestStats_Hour sends hour records: the readings of a closed hour, over
// many minutes, go as one record per series, equal to the store's, and
// those of the open hour wait.
func TestStats_Hour(t *testing.T) {
	s := openStore(t, t.TempDir())
	up := newUpstream(t)
	hour := int64(time.Hour)
	h0 := testEpoch - testEpoch%hour
	now := h0 + hour + 20*int64(time.Minute)
	u, err := New(s, Options{URL: up.srv.URL, Gateway: "gw", Interval: 10 * time.Millisecond,
		Data: Stats, Group: aggregate.Hour, Stats: s.Store, Now: func() time.Time { return time.Unix(0, now) }})
	if err != nil {
		t.Fatal(err)
	}
	var rs []buffer.Reading
	for m := range int64(60) {
		rs = append(rs, buffer.Reading{Device: "a", Metric: "t", TS: h0 + m*int64(time.Minute), Value: float64(m % 7)},
			buffer.Reading{Device: "b", Metric: "h", TS: h0 + m*int64(time.Minute) + 1, Value: float64(m)})
	}
	s.put(t, rs...)
	s.put(t, buffer.Reading{Device: "a", Metric: "t", TS: h0 + hour + 1, Value: 1})
	runUplink(t, u)
	waitFor(t, "the closed hour's records", func() bool { _, lines := up.received(); return len(lines) >= 2 })
	_, lines := up.received()
	want := []string{groupLine(t, s, aggregate.Hour, "a", "t", h0), groupLine(t, s, aggregate.Hour, "b", "h", h0)}
	if !slices.Equal(lines, want) {
		t.Errorf("got\n%q\nwant\n%q", lines, want)
	}
	if !strings.Contains(want[0], " count=60i,") {
		t.Errorf("record %q: want 60 readings", want[0])
	}
	if st := u.Status(); st.PendingReadings != 1 || st.SentReadings != 120 {
		t.Errorf("%d readings pending, %d sent; want 1 and 120", st.PendingReadings, st.SentReadings)
	}
}

// TestStats_BatchBytes splits the records of a batch into requests whose
// bodies stay under BatchBytes, each under an id of its own, and counts
// the batch's readings once.
func TestStats_BatchBytes(t *testing.T) {
	s := openStore(t, t.TempDir())
	up := newUpstream(t)
	m0 := testEpoch - testEpoch%int64(time.Minute)
	u, err := New(s, Options{URL: up.srv.URL, Gateway: "gw", Interval: 10 * time.Millisecond, BatchBytes: 400,
		Data: Stats, Group: aggregate.Minute, Stats: s.Store, Now: func() time.Time { return time.Unix(0, m0+int64(time.Hour)) }})
	if err != nil {
		t.Fatal(err)
	}
	var rs []buffer.Reading
	var want []string
	for d := range 10 {
		rs = append(rs, buffer.Reading{Device: fmt.Sprintf("dev-%d", d), Metric: "t", TS: m0 + int64(d), Value: float64(d)})
	}
	s.put(t, rs...)
	for _, r := range rs {
		want = append(want, statsLine(t, s, r.Device, r.Metric, m0))
	}
	runUplink(t, u)
	waitFor(t, "the batch", func() bool { return u.Status().PendingReadings == 0 })
	keys, lines := up.received()
	if !slices.Equal(lines, want) {
		t.Errorf("got\n%q\nwant\n%q", lines, want)
	}
	if len(keys) < 3 || keys[0] != "gw-0" || keys[1] != "gw-0-1" {
		t.Errorf("requests %q: want several, gw-0, gw-0-1, …", keys)
	}
	if st := u.Status(); st.SentBatches != uint64(len(keys)) || st.SentReadings != 10 {
		t.Errorf("%d requests, %d readings sent; want %d and 10", st.SentBatches, st.SentReadings, len(keys))
	}
}

// TestStats_SkipsTextReadings runs a data: stats uplink on a real store
// that holds text readings beside numbers: only the numbers' records go,
// the texts are counted as skipped, and a batch of texts alone sends
// nothing and still moves the cursor past them.
func TestStats_SkipsTextReadings(t *testing.T) {
	s := openStore(t, t.TempDir())
	up := newUpstream(t)
	minute := int64(time.Minute)
	m0 := testEpoch - testEpoch%minute
	now := m0 + 5*minute
	u, err := New(s, Options{URL: up.srv.URL, Gateway: "gw", Interval: 10 * time.Millisecond,
		Data: Stats, Group: aggregate.Minute, Stats: s.Store, Now: func() time.Time { return time.Unix(0, now) }})
	if err != nil {
		t.Fatal(err)
	}
	s.put(t,
		buffer.Reading{Device: "a", Metric: "t", TS: m0 + 1e9, Value: 20},
		buffer.Reading{Device: "a", Metric: "mode", TS: m0 + 1e9, Text: "heat"},
		buffer.Reading{Device: "a", Metric: "mode", TS: m0 + 2e9, Text: "cool"},
		buffer.Reading{Device: "a", Metric: "t", TS: m0 + 3e9, Value: 22})
	runUplink(t, u)
	waitFor(t, "the batch", func() bool { return u.Status().PendingReadings == 0 })
	_, lines := up.received()
	if want := []string{statsLine(t, s, "a", "t", m0)}; !slices.Equal(lines, want) {
		t.Errorf("got\n%q\nwant\n%q", lines, want)
	}
	if st := u.Status(); st.Skipped != 2 || st.SentReadings != 2 {
		t.Errorf("status: %d skipped, %d sent; want 2 and 2", st.Skipped, st.SentReadings)
	}

	s.put(t, buffer.Reading{Device: "b", Metric: "action", TS: m0 + minute, Text: "single"})
	waitFor(t, "the texts alone", func() bool { return u.Status().PendingReadings == 0 })
	if _, lines := up.received(); len(lines) != 1 {
		t.Errorf("a batch of texts sent %q", lines[1:])
	}
	if st := u.Status(); st.Skipped != 3 || st.SentReadings != 2 {
		t.Errorf("status: %d skipped, %d sent; want 3 and 2", st.Skipped, st.SentReadings)
	}
}
