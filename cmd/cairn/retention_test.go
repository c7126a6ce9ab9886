package main

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/uplink"
)

// retentionDoc is the part of /v1/status the retention tests read.
type retentionDoc struct {
	Ingest struct {
		Stored uint64 `json:"stored"`
		Failed uint64 `json:"failed"`
	} `json:"ingest"`
	Uplink    *uplink.Status          `json:"uplink"`
	Retention *buffer.RetentionStatus `json:"retention"`
}

// TestRetention_ProcessDiskCapUpstreamDown runs a real cairn, stamped with
// a build date in 2099, with a 16 MiB disk cap and an upstream that does
// not answer, and floods it with readings of random values until the cap
// makes it drop unsent ones. Every message must be stored and
// acknowledged, the directory must come back under the cap, every stored
// reading must be either pending or counted as dropped, and retention by
// age must say that it is paused by the build date.
func TestRetention_ProcessDiskCapUpstreamDown(t *testing.T) {
	bin := futureBinary.get(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
http:
  listen: "127.0.0.1:0"
store:
  memtable_mib: 1
retention:
  max_disk_bytes: 16MiB
uplink:
  url: http://127.0.0.1:%d/write
  retry_wait_min: 1s
  retry_wait_max: 2s
`, freePort(t)))
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	status := func() retentionDoc {
		var st retentionDoc
		if code := api.get(t, "/v1/status", &st); code != 200 || st.Retention == nil || st.Uplink == nil {
			t.Fatalf("GET /v1/status: %d, %+v; want 200 with retention and uplink", code, st)
		}
		return st
	}
	const limit = 16 << 20
	const fields = 50
	c := mustConnect(t, p.mqtt, "retention-flood")
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Now().Add(-time.Hour).UnixMilli()
	var window []paho.Token
	var sent int
	var peak int64
	for {
		if sent%500 == 0 {
			st := status()
			peak = max(peak, st.Retention.DiskBytes)
			if st.Retention.DroppedUnsent > 0 && sent >= 20000 {
				break
			}
			if sent > 400000 {
				t.Fatalf("%d messages sent and nothing dropped: %+v", sent, *st.Retention)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, `{"ts":%d`, start+int64(sent/10))
		for f := range fields {
			fmt.Fprintf(&b, `,"f%02d":%v`, f, rng.Float64())
		}
		b.WriteString("}")
		window = append(window, c.Publish(fmt.Sprintf("sensors/dev-%d/telemetry", sent%10), 1, false, b.String()))
		sent++
		if len(window) == 200 {
			waitCapToken(t, window[0])
			window = window[1:]
		}
	}
	for _, tok := range window {
		waitCapToken(t, tok)
	}
	var st retentionDoc
	waitUntil(t, 2*time.Minute, "retention to settle under the cap with every reading pending or dropped", func() (bool, string) {
		st = status()
		r, u := st.Retention, st.Uplink
		peak = max(peak, r.DiskBytes)
		// A pass of the disk cap is over when it records its run.
		done := st.Ingest.Stored == uint64(sent*fields) && r.DiskBytes <= limit && u.PendingReadings+r.DroppedUnsent == st.Ingest.Stored && r.LastRun != nil
		return done, fmt.Sprintf("stored %d of %d, failed %d, disk %d, pending %d + dropped %d, last run %v", st.Ingest.Stored, sent*fields, st.Ingest.Failed, r.DiskBytes, u.PendingReadings, r.DroppedUnsent, r.LastRun)
	})
	r := st.Retention
	t.Logf("%d readings stored, %d dropped unsent, %d removed, peak %d bytes", st.Ingest.Stored, r.DroppedUnsent, r.RemovedReadings, peak)
	if st.Uplink.SentReadings != 0 {
		t.Errorf("sent %d readings to an upstream that does not answer", st.Uplink.SentReadings)
	}
	if r.MaxDiskBytes != limit {
		t.Errorf("max_disk_bytes: got %d, want %d", r.MaxDiskBytes, limit)
	}
	// See TestRetention_DiskCapDropsOldestUnsent in buffer: during a
	// compaction the directory may hold the store twice, and the level 0
	// tables that arrive meanwhile (Badger stalls writes at 8).
	if peak > 2*limit+8<<20 {
		t.Errorf("data directory peaked at %d bytes, over twice the cap and 8 memtables", peak)
	}
	if !strings.Contains(r.PausedReason, "before this build's date (2099-01-01T00:00:00Z)") {
		t.Errorf("paused_reason: got %q, want the build date", r.PausedReason)
	}
	if r.OldestReading == nil || r.NewestReading == nil || r.NewestReading.UnixMilli() != start+int64((sent-1)/10) || r.LastRun == nil {
		t.Errorf("retention status: %+v; want the oldest and newest reading and a last run", *r)
	}
	if !strings.Contains(p.out.String(), `level=WARN msg="disk cap: dropped readings that were never sent upstream"`) {
		t.Errorf("no warning about dropped readings in the log:\n%s", p.out)
	}
	// Retention may still be deleting: the count only grows.
	out, err := exec.Command(bin, "status", "-url", "http://"+p.http).CombinedOutput()
	m := regexp.MustCompile(`retention: .* of a 16\.0 MiB cap, \d+ readings removed, (\d+) dropped unsent`).FindSubmatch(out)
	if err != nil || m == nil || !strings.Contains(string(out), "retention paused: the clock") {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	if n, _ := strconv.ParseUint(string(m[1]), 10, 64); n < r.DroppedUnsent {
		t.Errorf("cairn status: %d dropped unsent, want at least %d\n%s", n, r.DroppedUnsent, out)
	}
}

// startRetention starts a real cairn with the embedded broker and the
// given lines of its retention: section, and connects a publisher.
func startRetention(t *testing.T, retention string) (*apiClient, paho.Client) {
	t.Helper()
	cfg := writeConfig(t, t.TempDir(), localConfig+`retention:
`+retention)
	p := startCairn(t, cairnBinary.get(t), cfg)
	pub := mustConnect(t, p.mqtt, "retention-publisher")
	t.Cleanup(func() { pub.Disconnect(0) })
	return newAPIClient(p.http), pub
}

// waitRetention waits until retention has run and removed at least
// removed readings, and returns the status then.
func waitRetention(t *testing.T, api *apiClient, removed uint64) retentionDoc {
	t.Helper()
	var doc retentionDoc
	waitUntil(t, 3*time.Minute, "retention to run", func() (bool, string) {
		if code := api.get(t, "/v1/status", &doc); code != 200 {
			return false, fmt.Sprint(code)
		}
		r := doc.Retention
		return r != nil && r.LastRun != nil && r.RemovedReadings >= removed, fmt.Sprintf("%+v", r)
	})
	return doc
}

// TestRetention_ProcessAgeAndCount runs a real cairn with raw_max_age 1h
// and raw_max_readings_per_series 50: readings from two hours ago go, and
// of a recent series only the newest 50 stay. Retention by age first runs
// a minute after start, so this test takes that long.
func TestRetention_ProcessAgeAndCount(t *testing.T) {
	t.Parallel() // it mostly waits: beside the other one that does
	api, pub := startRetention(t, "  raw_max_age: 1h\n  raw_max_readings_per_series: 50\n")
	now := time.Now()
	old := now.Add(-2 * time.Hour).UnixMilli()
	for i := range 100 {
		if err := publish1(pub, "sensors/old/telemetry", fmt.Sprintf(`{"ts":%d,"t":%d,"h":%d}`, old+int64(i)*1000, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	recent := now.Add(-10 * time.Minute).UnixMilli()
	for i := range 200 {
		if err := publish1(pub, "sensors/new/telemetry", fmt.Sprintf(`{"ts":%d,"t":%d,"h":%d}`, recent+int64(i)*1000, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	doc := waitRetention(t, api, 500)
	if r := doc.Retention; r.RemovedReadings != 500 || r.PausedReason != "" || r.DroppedUnsent != 0 {
		t.Errorf("retention status: %+v; want 500 removed (200 by age, 300 by count), not paused", *r)
	}
	var rs readingsDoc
	if code := api.get(t, "/v1/devices/old/readings?limit=100", &rs); code == 200 && len(rs.Readings) != 0 {
		t.Errorf("device old: %d readings left, want none (older than raw_max_age)", len(rs.Readings))
	}
	for _, metric := range []string{"t", "h"} {
		if code := api.get(t, "/v1/devices/new/readings?limit=1000&order=asc&metric="+metric, &rs); code != 200 {
			t.Fatalf("readings of new/%s: %d", metric, code)
		}
		if len(rs.Readings) != 50 || rs.Readings[0].Value != 150 || rs.Readings[49].Value != 199 {
			t.Errorf("new/%s: %d readings from %v, want the newest 50 (150 to 199)", metric, len(rs.Readings), rs.Readings[:min(1, len(rs.Readings))])
		}
	}
}

// TestRetention_ProcessWindowFromLatest runs a real cairn with
// raw_window_from_latest 1h and no age limit: a device whose clock is
// years behind keeps its last hour of readings, by its own clock.
func TestRetention_ProcessWindowFromLatest(t *testing.T) {
	t.Parallel() // it mostly waits: beside the other one that does
	api, pub := startRetention(t, "  raw_max_age: 0\n  raw_window_from_latest: 1h\n")
	skewed := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 180 { // one a minute for three hours
		if err := publish1(pub, "sensors/skewed/telemetry", fmt.Sprintf(`{"ts":%d,"t":%d}`, skewed+int64(i)*60000, i)); err != nil {
			t.Fatal(err)
		}
	}
	doc := waitRetention(t, api, 1)
	var rs readingsDoc
	if code := api.get(t, "/v1/devices/skewed/readings?limit=1000&order=asc", &rs); code != 200 {
		t.Fatalf("readings: %d", code)
	}
	// Within an hour of the newest (minute 179): minutes 119 to 179.
	if len(rs.Readings) != 61 || rs.Readings[0].Value != 119 || rs.Readings[60].Value != 179 {
		t.Errorf("skewed: %d readings from %v, want minutes 119 to 179", len(rs.Readings), rs.Readings[:min(1, len(rs.Readings))])
	}
	if r := doc.Retention; r.RemovedReadings != 119 {
		t.Errorf("retention status: %+v, want 119 removed", *r)
	}
}

// waitCapToken waits for the PUBACK of a message sent while the disk cap
// may hold ingest: cairn acknowledges nothing until it has dropped the
// oldest unsent readings and compacted, which on a busy machine (the
// whole suite at once) has taken longer than one PUBACK's ackTimeout.
// The test asks that every message be acknowledged, not how soon.
func waitCapToken(t *testing.T, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(3 * ackTimeout) {
		t.Fatalf("no PUBACK in %s", 3*ackTimeout)
	}
	if err := tok.Error(); err != nil {
		t.Fatal(err)
	}
}
