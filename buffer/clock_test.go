package buffer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// testClock is a wall clock and a kernel state that a test sets.
type testClock struct {
	mu   sync.Mutex
	now  time.Time
	sync SyncState
}

func (c *testClock) set(now time.Time, sync SyncState) {
	c.mu.Lock()
	c.now, c.sync = now, sync
	c.mu.Unlock()
}

func (c *testClock) options(floor time.Time) ClockOptions {
	return ClockOptions{
		Now:    func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now },
		Synced: func() SyncState { c.mu.Lock(); defer c.mu.Unlock(); return c.sync },
		Floor:  floor,
	}
}

// testStoreClock opens a store in a new directory and runs a Writer of it
// whose Clock is tc's.
func testStoreClock(t *testing.T, tc *testClock, floor time.Time, opts WriterOptions) (*Store, *Writer, *Clock) {
	t.Helper()
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClock(s, tc.options(floor))
	if err != nil {
		t.Fatal(err)
	}
	opts.Clock = c
	return s, startWriter(t, s, opts), c
}

// TestClock_Judge: what the Clock makes of the kernel's state, the build
// date and the devices' own timestamps.
func TestClock_Judge(t *testing.T) {
	floor := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	for _, tc := range []struct {
		name    string
		now     time.Time
		sync    SyncState
		offsets []time.Duration // of messages with their own timestamps
		always  bool
		trusted bool
		reason  string
	}{
		{"synchronised", now, SyncYes, nil, false, true, "synchronised (NTP)"},
		{"synchronised, devices a year off", now, SyncYes, repeat(year, 20), false, true, "synchronised"},
		{"before the build date", floor.Add(-time.Hour), SyncYes, nil, false, false, "before this build's date"},
		{"not synchronised, no devices' timestamps", now, SyncNo, nil, false, false, "not synchronised (NTP), and 0 of the 8 messages"},
		{"not synchronised, too few", now, SyncNo, repeat(time.Second, 7), false, false, "7 of the 8"},
		{"not synchronised, devices agree", now, SyncNo, repeat(-2*time.Second, 8), false, true, "agree with it (median offset -2s over 8 messages)"},
		{"not synchronised, devices a year ahead", now, SyncNo, repeat(year, 10), false, false, "are 8760h0m0s from it"},
		{"not synchronised, one outlier", now, SyncNo, append(repeat(time.Second, 10), 74*year), false, true, "agree"},
		{"not synchronised, always", now, SyncNo, nil, true, true, "clock.trust is always"},
		{"unknown", now, SyncUnknown, nil, false, true, "cannot say"},
		{"unknown, devices disagree", now, SyncUnknown, repeat(-year, 10), false, false, "from it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &testClock{now: tc.now, sync: tc.sync}
			opts := clk.options(floor)
			opts.Always = tc.always
			c, err := NewClock(nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, off := range tc.offsets {
				recv := tc.now.Add(time.Duration(i) * clockSampleGap)
				c.Observe(recv.Add(off), recv)
			}
			ok, why := c.Check()
			if ok != tc.trusted || !strings.Contains(why, tc.reason) || c.Trusted() != ok {
				t.Errorf("trusted %v (%q), want %v (%q)", ok, why, tc.trusted, tc.reason)
			}
			if st := c.Status(); st.Trusted != ok || st.Reason != why || st.Synced != tc.sync.String() {
				t.Errorf("status %+v", st)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = d
	}
	return ds
}

// TestClock_SampledAtMostEvery100ms: a flood of messages from one device
// does not fill the median in a moment.
func TestClock_SampledAtMostEvery100ms(t *testing.T) {
	c, err := NewClock(nil, ClockOptions{Synced: func() SyncState { return SyncNo }})
	if err != nil {
		t.Fatal(err)
	}
	recv := time.Now()
	for i := range 1000 {
		at := recv.Add(time.Duration(i) * time.Millisecond)
		c.Observe(at, at)
	}
	if _, n := c.median(); n != 10 {
		t.Errorf("offsets sampled from a second of messages: %d, want 10", n)
	}
}

// TestClock_SpansOfUntrustedStamps: stamps given while the clock is not
// trusted are recorded on disk (once per spanAhead), the span closes when
// the clock is trusted, and it keeps readings for a policy's age from
// then.
func TestClock_SpansOfUntrustedStamps(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	behind := time.Date(2025, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := &testClock{now: behind, sync: SyncNo}
	c, err := NewClock(s, clk.options(time.Time{}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 { // a message a minute for half an hour
		if err := c.Stamped(behind.Add(time.Duration(i) * time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	spans := c.Status().UntrustedSpans
	if len(spans) != 1 || !spans[0].From.Equal(behind) || spans[0].To.Before(behind.Add(29*time.Minute)) || !spans[0].TrustedAt.IsZero() {
		t.Fatalf("spans: %+v", spans)
	}
	if from, ok := c.Protected(behind, time.Hour); !ok || from != behind.UnixNano() {
		t.Errorf("protected from %d (%v), want %d", from, ok, behind.UnixNano())
	}
	// A restart reads the span back.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err = NewClock(s, clk.options(time.Time{})); err != nil {
		t.Fatal(err)
	}
	if got := c.Status().UntrustedSpans; len(got) != 1 || !got[0].From.Equal(spans[0].From) || !got[0].To.Equal(spans[0].To) {
		t.Fatalf("spans after a restart: %+v, want %+v", got, spans)
	}
	// NTP sets the clock a year ahead: the span closes.
	fixed := behind.Add(365 * 24 * time.Hour)
	clk.set(fixed, SyncYes)
	if ok, why := c.Check(); !ok {
		t.Fatalf("synchronised clock not trusted: %s", why)
	}
	if err := c.Stamped(fixed); err != nil { // trusted: nothing to record
		t.Fatal(err)
	}
	spans = c.Status().UntrustedSpans
	if len(spans) != 1 || !spans[0].TrustedAt.Equal(fixed) {
		t.Fatalf("spans once trusted: %+v", spans)
	}
	for _, tc := range []struct {
		now     time.Time
		age     time.Duration
		protect bool
	}{
		{fixed, 72 * time.Hour, true},
		{fixed.Add(71 * time.Hour), 72 * time.Hour, true},
		{fixed.Add(72 * time.Hour), 72 * time.Hour, false},
		{fixed.Add(72 * time.Hour), 30 * 24 * time.Hour, true},
	} {
		if _, ok := c.Protected(tc.now, tc.age); ok != tc.protect {
			t.Errorf("protected at %s for %s: %v, want %v", tc.now, tc.age, ok, tc.protect)
		}
	}
	if end, ok := c.protectionEnds(fixed, 72*time.Hour); !ok || !end.Equal(fixed.Add(72*time.Hour)) {
		t.Errorf("protection ends %s (%v), want %s", end, ok, fixed.Add(72*time.Hour))
	}
}

// TestPrune_KeepsWhatAnUntrustedClockStamped: readings stamped while the
// clock was a year behind are not deleted by age when NTP sets it, nor is
// any reading after the span's start, until the clock has been trusted
// for raw_max_age; then they go, and retention by age runs as before.
func TestPrune_KeepsWhatAnUntrustedClockStamped(t *testing.T) {
	const age = 72 * time.Hour
	right := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	behind := right.Add(-365 * 24 * time.Hour)
	clk := &testClock{now: behind, sync: SyncNo}
	s, w, c := testStoreClock(t, clk, time.Time{}, WriterOptions{SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: age}})
	ctx := context.Background()
	// Valid readings with their own timestamps, a day apart, the last
	// five days before the right time.
	var valid []Reading
	for d := range 5 {
		valid = append(valid, Reading{Device: "dated", Metric: "m", TS: right.Add(-time.Duration(d) * 24 * time.Hour).UnixNano(), Value: float64(d)})
	}
	write(t, w, valid...)
	// An hour of readings stamped by the clock a year behind.
	var stamped []Reading
	for i := range 6 {
		recv := behind.Add(time.Duration(i) * 10 * time.Minute)
		if err := c.Stamped(recv); err != nil {
			t.Fatal(err)
		}
		stamped = append(stamped, Reading{Device: "stamped", Metric: "m", TS: recv.UnixNano(), Value: float64(i)})
	}
	write(t, w, stamped...)
	if err := w.Prune(ctx, behind); !errors.Is(err, ErrClockBehind) || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("prune with the clock untrusted: %v", err)
	}
	// NTP sets the clock.
	clk.set(right, SyncYes)
	if err := w.Prune(ctx, right); err != nil {
		t.Fatal(err)
	}
	if n := s.ReadingCount(); n != uint64(len(valid)+len(stamped)) {
		t.Errorf("after the clock was set: %d readings, want all %d", n, len(valid)+len(stamped))
	}
	// raw_max_age later, every reading stamped is really that old.
	later := right.Add(age)
	clk.set(later, SyncYes)
	if err := w.Prune(ctx, later); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		device string
		n      int
	}{{"stamped", 0}, {"dated", 1}} { // of the dated ones, the newest
		got, err := s.Readings(all(tc.device))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.n {
			t.Errorf("%s: %d readings left, want %d", tc.device, len(got), tc.n)
		}
	}
}

// TestPrune_ReadingsAheadOfATrustedClock: readings ahead of a trusted
// clock, by half an hour or by 74 years, do not pause retention by age.
func TestPrune_ReadingsAheadOfATrustedClock(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clk := &testClock{now: now, sync: SyncYes}
	_, w, _ := testStoreClock(t, clk, time.Time{}, WriterOptions{SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	write(t, w,
		Reading{Device: "d", Metric: "m", TS: now.Add(-3 * 24 * time.Hour).UnixNano(), Value: 1},
		Reading{Device: "d", Metric: "m", TS: now.Add(30 * time.Minute).UnixNano(), Value: 2},
		Reading{Device: "e", Metric: "m", TS: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), Value: 3})
	if err := w.Prune(context.Background(), now); err != nil {
		t.Fatalf("prune behind the newest readings: %v", err)
	}
	if got := w.Stats().PrunedReadings; got != 1 {
		t.Errorf("pruned %d readings, want the one 3 days old", got)
	}
}
