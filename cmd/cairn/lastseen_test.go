package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// lastSeenConfig reads The Things Stack's uplinks and JSON documents on
// sensors/{device}/telemetry, and takes readings dated whenever: the
// documentation's example is years old, and the test's other device's
// clock is years ahead.
const lastSeenConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  max_future_skew: 0
  topics:
    - preset: ttn
    - pattern: "sensors/{device}/telemetry"
      format: json
http:
  listen: "127.0.0.1:0"
retention:
  raw_max_age: 0
`

// seenDoc is the part of /v1/devices the last-seen test reads.
type seenDoc struct {
	Devices []struct {
		Device        string `json:"device"`
		LastSeen      string `json:"last_seen"`
		NewestReading string `json:"newest_reading"`
	} `json:"devices"`
}

// TestRun_LastSeenIsWhenHeard publishes The Things Stack's own uplink
// example, dated 2020, and a document dated 2030 to a real cairn. Last
// seen must be when cairn heard each device, by its own clock, on
// /v1/devices and on the dashboard (neither quiet nor "just now" for
// the reading's sake), with the newest reading's own time beside it;
// after a restart, last seen must be what it was, not "never" and not
// the reading's time.
func TestRun_LastSeenIsWhenHeard(t *testing.T) {
	bin := cairnBinary.get(t)
	var ttn testkit.Fixture
	for _, fx := range testkit.LoadFixtures(t, filepath.Join("..", "..", "gateway", "payload", "testdata", "presets")) {
		if fx.Name == "ttn-uplink-decoded.txt" {
			ttn = fx
		}
	}
	if ttn.Topic == "" {
		t.Fatal("no fixture ttn-uplink-decoded.txt")
	}
	oldTS := ttn.Readings[0].At
	futureTS := time.Date(2030, 6, 1, 8, 30, 0, 0, time.UTC)

	cfg := writeConfig(t, t.TempDir(), lastSeenConfig)
	p := startCairn(t, bin, cfg)
	pub := mustConnect(t, p.mqtt, "last-seen")
	sent := time.Now()
	if err := publish1(pub, ttn.Topic, string(ttn.Payload)); err != nil {
		t.Fatal(err)
	}
	if err := publish1(pub, "sensors/ahead/telemetry", fmt.Sprintf(`{"ts":%d,"temperature":21.5}`, futureTS.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	pub.Disconnect(100)

	want := map[string]time.Time{ttn.Readings[0].Device: oldTS, "ahead": futureTS}
	heard := checkLastSeen(t, newAPIClient(p.http), want, sent, acked)
	checkDevicesPage(t, newAPIClient(p.http), want, "just now|[0-9]+ s ago")

	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
	p = startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	again := checkLastSeen(t, api, want, sent, acked)
	for d, h := range heard {
		if !again[d].Equal(h) {
			t.Errorf("%s: last seen %v after a restart, want %v as before", d, again[d], h)
		}
	}
	checkDevicesPage(t, api, want, "just now|[0-9]+ s ago|1 min ago")
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
}

// checkLastSeen checks that /v1/devices has each device of want last
// seen between sent and acked and its newest reading at its time in
// want, and returns when each was last seen.
func checkLastSeen(t *testing.T, api *apiClient, want map[string]time.Time, sent, acked time.Time) map[string]time.Time {
	t.Helper()
	var doc seenDoc
	if code := api.get(t, "/v1/devices", &doc); code != http.StatusOK {
		t.Fatalf("GET /v1/devices: %d", code)
	}
	seen := make(map[string]time.Time)
	for _, d := range doc.Devices {
		w, ok := want[d.Device]
		if !ok {
			continue
		}
		ls, err := time.Parse(time.RFC3339Nano, d.LastSeen)
		if err != nil || ls.Before(sent.Add(-time.Millisecond)) || ls.After(acked) {
			t.Errorf("%s: last_seen %q (%v), want between %v and %v", d.Device, d.LastSeen, err, sent.UTC(), acked.UTC())
		}
		if nr, err := time.Parse(time.RFC3339Nano, d.NewestReading); err != nil || !nr.Equal(w) {
			t.Errorf("%s: newest_reading %q (%v), want %v", d.Device, d.NewestReading, err, w)
		}
		seen[d.Device] = ls
	}
	if len(seen) != len(want) {
		t.Errorf("/v1/devices has %d of the devices %v: %+v", len(seen), want, doc)
	}
	return seen
}

// checkDevicesPage checks the dashboard's devices: each of want last seen
// as ago says, not quiet, and its newest reading's date beside it.
func checkDevicesPage(t *testing.T, api *apiClient, want map[string]time.Time, ago string) {
	t.Helper()
	code, body, err := api.fetch("/?part=devices")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /?part=devices: %d, %v", code, err)
	}
	for d, w := range want {
		row := regexp.MustCompile(`<tr[^>]*><th scope="row"><a [^>]*>` + regexp.QuoteMeta(d) + `</a></th><td>(.*?)</td>`).FindStringSubmatch(string(body))
		if row == nil {
			t.Errorf("no row of %s in the devices part:\n%s", d, body)
			continue
		}
		if !regexp.MustCompile(`<time [^>]*data-f="a"[^>]*>(` + ago + `)</time>`).MatchString(row[1]) {
			t.Errorf("%s: last seen %q, want %s", d, row[1], ago)
		}
		if strings.Contains(row[0], "quiet") {
			t.Errorf("%s is flagged quiet: %q", d, row[0])
		}
		if date := w.UTC().Format("2006-01-02 15:04 UTC"); !strings.Contains(row[1], "newest reading dated") || !strings.Contains(row[1], date) {
			t.Errorf("%s: %q does not give the newest reading's date, %s", d, row[1], date)
		}
	}
}
