package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/buffer"
)

// The clock stories: a real cairn (clockBinary, built 2026-06-01) whose
// wall clock and kernel synchronisation state the test sets through the
// file CAIRN_TEST_CLOCK names. Retention keeps raw readings for an hour;
// a prune by age is made due by moving the clock past the retention's
// next run.

const clockConfig = localConfig + `retention:
  raw_max_age: 1h
clock:
  trust: auto
`

// movedClock is the file a clockBinary reads its clock from.
type movedClock struct {
	path   string
	offset time.Duration
	synced string
	setAt  time.Time // the moved clock's time when last set
}

func newMovedClock(t *testing.T, offset time.Duration, synced string) *movedClock {
	c := &movedClock{path: filepath.Join(t.TempDir(), "clock")}
	c.set(t, offset, synced)
	return c
}

// set moves the clock to the system's plus offset, and has the kernel
// say synced (yes, no or unknown).
func (c *movedClock) set(t *testing.T, offset time.Duration, synced string) {
	t.Helper()
	tmp := c.path + ".new"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "offset %s\nsynced %s\n", offset, synced), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		t.Fatal(err)
	}
	c.offset, c.synced, c.setAt = offset, synced, time.Now().Add(offset)
}

func (c *movedClock) env() []string { return []string{"CAIRN_TEST_CLOCK=" + c.path} }

// clockDoc is the part of /v1/status the clock tests read.
type clockDoc struct {
	Ingest struct {
		Stored   uint64            `json:"stored"`
		ByReason map[string]uint64 `json:"rejected_by_reason"`
	} `json:"ingest"`
	Store struct {
		Readings uint64 `json:"readings"`
	} `json:"store"`
	Retention *buffer.RetentionStatus `json:"retention"`
	Clock     *buffer.ClockStatus     `json:"clock"`
}

func clockStatus(t *testing.T, api *apiClient) clockDoc {
	t.Helper()
	var st clockDoc
	if code := api.get(t, "/v1/status", &st); code != 200 || st.Retention == nil || st.Clock == nil {
		t.Fatalf("GET /v1/status: %d, %+v; want 200 with retention and clock", code, st)
	}
	return st
}

// waitClock waits until the status says the clock is synced and trusted
// as given, and the clock reads the offset set last.
func waitClock(t *testing.T, api *apiClient, c *movedClock, synced string, trusted bool) clockDoc {
	t.Helper()
	var st clockDoc
	waitUntil(t, 10*time.Second, fmt.Sprintf("the clock synced %s, trusted %v", synced, trusted), func() (bool, string) {
		st = clockStatus(t, api)
		off := st.Clock.Now.Sub(time.Now())
		moved := off > c.offset-time.Minute && off < c.offset+time.Minute
		return st.Clock.Synced == synced && st.Clock.Trusted == trusted && moved, fmt.Sprintf("%+v", *st.Clock)
	})
	return st
}

// pruneNow waits for a prune by age after the clock was set last: one
// that is due runs within a second; otherwise the clock is moved to
// retention's next run.
func pruneNow(t *testing.T, api *apiClient, c *movedClock) clockDoc {
	t.Helper()
	var st clockDoc
	waitUntil(t, 30*time.Second, "a prune by age", func() (bool, string) {
		st = clockStatus(t, api)
		now, last, next := st.Clock.Now, st.Retention.LastRun, st.Retention.NextRun
		// A run before the clock was set back may read later than now.
		if last != nil && !last.Before(c.setAt) && !last.After(now) {
			return true, ""
		}
		// cairn reads the clock file again within 50 ms.
		moved := now.Sub(time.Now().Add(c.offset)).Abs() < time.Minute
		if moved && next != nil && next.After(now) && next.Sub(now) <= time.Hour {
			c.set(t, c.offset+next.Sub(now)+time.Second, c.synced)
		}
		return false, fmt.Sprintf("last run %v, next %v, the clock set at %s", last, next, c.setAt)
	})
	return st
}

// publishAt publishes {"ts": ms, "temp": v} on device's topic (no ts when
// at is zero) and waits for its PUBACK.
func publishAt(t *testing.T, c paho.Client, device string, at time.Time, v float64) {
	t.Helper()
	payload := fmt.Sprintf(`{"temp":%v}`, v)
	if !at.IsZero() {
		payload = fmt.Sprintf(`{"ts":%d,"temp":%v}`, at.UnixMilli(), v)
	}
	waitToken(t, c.Publish("sensors/"+device+"/telemetry", 1, false, payload))
}

// readingTimes returns the times of device's stored temp readings.
func readingTimes(t *testing.T, api *apiClient, device string) []time.Time {
	t.Helper()
	var doc readingsDoc
	switch code := api.get(t, "/v1/devices/"+device+"/readings?metric=temp&limit=10000", &doc); code {
	case 200:
	case 404:
		return nil
	default:
		t.Fatalf("readings of %s: %d", device, code)
	}
	var ts []time.Time
	for _, r := range doc.Readings {
		at, err := time.Parse(time.RFC3339Nano, r.TS)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, at)
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// wantTimes fails the test unless device's readings are at want.
func wantTimes(t *testing.T, api *apiClient, device string, want ...time.Time) {
	t.Helper()
	got := readingTimes(t, api, device)
	slices.SortFunc(want, time.Time.Compare)
	if !slices.EqualFunc(got, want, func(a, b time.Time) bool { return a.UnixMilli() == b.UnixMilli() }) {
		t.Errorf("%s: readings at %v, want %v", device, got, want)
	}
}

// datedReadings publishes a reading of device "dated" at each of times,
// 110 ms apart (the clock samples one device timestamp per 100 ms).
func datedReadings(t *testing.T, c paho.Client, times ...time.Time) {
	t.Helper()
	for i, at := range times {
		publishAt(t, c, "dated", at, float64(i))
		time.Sleep(110 * time.Millisecond)
	}
}

// TestClock_AheadAtBoot: a board boots with its clock a year ahead and
// not synchronised. Retention by age stays paused though a sensor sends a
// reading without a timestamp (stamped with the wrong year); once NTP
// sets the clock, retention runs, deletes only what is older than
// raw_max_age, and every valid reading is still there.
func TestClock_AheadAtBoot(t *testing.T) {
	year := 365 * 24 * time.Hour
	clock := newMovedClock(t, year, "no")
	p := startCairnEnv(t, clockBinary.get(t), writeConfig(t, t.TempDir(), clockConfig), clock.env())
	api := newAPIClient(p.http)
	c := mustConnect(t, p.mqtt, "clock-ahead")

	now := time.Now().Truncate(time.Millisecond)
	old := []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour)}
	var recent []time.Time
	for m := 50; m >= 5; m -= 5 {
		recent = append(recent, now.Add(-time.Duration(m)*time.Minute))
	}
	datedReadings(t, c, append(slices.Clone(old), recent...)...)
	publishAt(t, c, "undated", time.Time{}, 1) // stamped a year ahead
	st := waitClock(t, api, clock, "no", false)
	if !strings.Contains(st.Clock.Reason, "devices' own timestamps are -8760h") {
		t.Errorf("clock reason %q, want the devices' timestamps a year behind it", st.Clock.Reason)
	}
	if _, metrics, err := api.fetch("/metrics"); err != nil || !bytes.Contains(metrics, []byte("\ncairn_clock_trusted 0\n")) || !bytes.Contains(metrics, []byte("\ncairn_clock_synchronized 0\n")) {
		t.Errorf("/metrics: %v, want cairn_clock_trusted 0 and cairn_clock_synchronized 0", err)
	}
	st = pruneNow(t, api, clock)
	if !strings.Contains(st.Retention.PausedReason, "the clock is not trusted") || st.Retention.RemovedReadings != 0 {
		t.Errorf("with the clock a year ahead: paused %q, removed %d; want paused, nothing removed", st.Retention.PausedReason, st.Retention.RemovedReadings)
	}
	stamped := readingTimes(t, api, "undated")
	if len(stamped) != 1 || stamped[0].Before(now.Add(year-time.Minute)) {
		t.Fatalf("the reading without a timestamp: %v, want one stamped a year ahead", stamped)
	}

	// NTP sets the clock.
	clock.set(t, 0, "yes")
	waitClock(t, api, clock, "yes", true)
	st = pruneNow(t, api, clock)
	if st.Retention.PausedReason != "" || st.Retention.RemovedReadings != uint64(len(old)) {
		t.Errorf("with the clock set: paused %q, removed %d; want running, the %d old readings removed", st.Retention.PausedReason, st.Retention.RemovedReadings, len(old))
	}
	wantTimes(t, api, "dated", recent...)
	wantTimes(t, api, "undated", stamped...)
	if t.Failed() {
		t.Logf("cairn's output:\n%s", p.out)
	}
}

// TestClock_ReadingIn2100WhileUnsynced: while the clock reads 2025 (before
// the build date) and is not synchronised, the future-skew check is off
// and a reading dated 2100 is stored. Once the clock is set it never
// pauses retention by age, across a restart after SIGKILL too, and the
// skew check applies again.
func TestClock_ReadingIn2100WhileUnsynced(t *testing.T) {
	year := 365 * 24 * time.Hour
	clock := newMovedClock(t, -year, "no")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, clockConfig)
	p := startCairnEnv(t, clockBinary.get(t), cfg, clock.env())
	api := newAPIClient(p.http)
	c := mustConnect(t, p.mqtt, "clock-2100")

	st := waitClock(t, api, clock, "no", false)
	if !strings.Contains(st.Clock.Reason, "before this build's date (2026-06-01T00:00:00Z)") {
		t.Errorf("clock reason %q, want the build date", st.Clock.Reason)
	}
	y2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	publishAt(t, c, "future", y2100, 1)
	now := time.Now().Truncate(time.Millisecond)
	old, recent := now.Add(-2*time.Hour), now.Add(-10*time.Minute)
	datedReadings(t, c, old, recent)
	wantTimes(t, api, "future", y2100)

	clock.set(t, 0, "yes")
	waitClock(t, api, clock, "yes", true)
	st = pruneNow(t, api, clock)
	if st.Retention.PausedReason != "" || st.Retention.RemovedReadings != 1 {
		t.Errorf("with the clock set: paused %q, removed %d; want running, the old reading removed", st.Retention.PausedReason, st.Retention.RemovedReadings)
	}
	wantTimes(t, api, "dated", recent)
	// Trusted, the clock refuses a reading dated 2100 again.
	publishAt(t, c, "future", y2100.Add(time.Hour), 2)
	if st := clockStatus(t, api); st.Ingest.ByReason["time_out_of_range"] != 1 {
		t.Errorf("rejected: %v, want one time_out_of_range", st.Ingest.ByReason)
	}

	// Killed and started again, retention by age still runs.
	c.Disconnect(0)
	p.Cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // it may have exited; checked below
	<-p.Exited()
	p = startCairnEnv(t, clockBinary.get(t), cfg, clock.env())
	api = newAPIClient(p.http)
	waitClock(t, api, clock, "yes", true)
	c = mustConnect(t, p.mqtt, "clock-2100-again")
	older := time.Now().Add(-90 * time.Minute).Truncate(time.Millisecond)
	publishAt(t, c, "dated", older, 3)
	st = pruneNow(t, api, clock)
	if st.Retention.PausedReason != "" || st.Retention.RemovedReadings != 1 {
		t.Errorf("after a restart: paused %q, removed %d; want running, the reading 90 minutes old removed", st.Retention.PausedReason, st.Retention.RemovedReadings)
	}
	wantTimes(t, api, "dated", recent)
	wantTimes(t, api, "future", y2100)
	if t.Failed() {
		t.Logf("cairn's output:\n%s", p.out)
	}
}

// TestClock_BehindStampsKept: readings without a timestamp received while
// the clock is a year behind are stamped a year ago. Once NTP sets the
// clock they are kept, and every reading from the start of their span on,
// until the clock has been trusted for raw_max_age: then they are really
// that old, and go with the rest of what is.
func TestClock_BehindStampsKept(t *testing.T) {
	year := 365 * 24 * time.Hour
	clock := newMovedClock(t, -year, "no")
	p := startCairnEnv(t, clockBinary.get(t), writeConfig(t, t.TempDir(), clockConfig), clock.env())
	api := newAPIClient(p.http)
	c := mustConnect(t, p.mqtt, "clock-behind")

	for i := range 5 {
		publishAt(t, c, "undated", time.Time{}, float64(i))
	}
	stamped := readingTimes(t, api, "undated")
	if len(stamped) != 5 || stamped[4].After(time.Now().Add(-year+time.Minute)) {
		t.Fatalf("readings without a timestamp: %v, want 5 stamped a year ago", stamped)
	}
	now := time.Now().Truncate(time.Millisecond)
	dated := []time.Time{now.Add(-3 * time.Hour), now.Add(-10 * time.Minute), now.Add(20 * time.Minute), now.Add(40 * time.Minute)}
	datedReadings(t, c, dated...)
	st := clockStatus(t, api)
	if sp := st.Clock.UntrustedSpans; len(sp) != 1 || sp[0].From.After(stamped[0]) || sp[0].To.Before(stamped[4]) || !sp[0].TrustedAt.IsZero() {
		t.Errorf("untrusted spans %+v, want one open, over %s to %s", sp, stamped[0], stamped[4])
	}

	clock.set(t, 0, "yes")
	waitClock(t, api, clock, "yes", true)
	st = pruneNow(t, api, clock)
	if st.Retention.PausedReason != "" || st.Retention.RemovedReadings != 0 {
		t.Errorf("with the clock just set: paused %q, removed %d; want running, nothing removed", st.Retention.PausedReason, st.Retention.RemovedReadings)
	}
	wantTimes(t, api, "undated", stamped...)
	wantTimes(t, api, "dated", dated...)
	if sp := st.Clock.UntrustedSpans; len(sp) != 1 || sp[0].TrustedAt.IsZero() {
		t.Errorf("untrusted spans %+v, want one, trusted since", sp)
	}

	// raw_max_age after the clock was set, and some minutes more.
	clock.set(t, clock.offset+time.Hour+4*time.Minute, "yes")
	st = pruneNow(t, api, clock)
	cut := st.Retention.LastRun.Add(-time.Hour)
	var kept []time.Time
	for _, at := range dated {
		if !at.Before(cut) {
			kept = append(kept, at)
		}
	}
	if len(kept) != 2 || st.Retention.PausedReason != "" || st.Retention.RemovedReadings != uint64(len(stamped)+len(dated)-len(kept)) {
		t.Errorf("an hour later: paused %q, removed %d, kept %v; want running, all but the 2 newest dated removed", st.Retention.PausedReason, st.Retention.RemovedReadings, kept)
	}
	wantTimes(t, api, "undated")
	wantTimes(t, api, "dated", kept...)

	out, err := exec.Command(clockBinary.get(t), "status", "-url", "http://"+p.http).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^clock: +\S+, synchronised: yes, trusted: synchronised \(NTP\)$`).Match(out) ||
		!regexp.MustCompile(`(?m)^ +readings stamped by an untrusted clock from 2025-\S+ to 2025-\S+: trusted since 2026-`).Match(out) {
		t.Errorf("cairn status: %v\n%s", err, out)
	}
	_, metrics, err := api.fetch("/metrics")
	if err != nil || !bytes.Contains(metrics, []byte("\ncairn_clock_trusted 1\n")) || !bytes.Contains(metrics, []byte("\ncairn_clock_synchronized 1\n")) {
		t.Errorf("/metrics: %v, want cairn_clock_trusted 1 and cairn_clock_synchronized 1", err)
	}
}
