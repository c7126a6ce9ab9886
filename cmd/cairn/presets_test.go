package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/scripts/testkit"
	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// presetsConfig names one preset, with every field it reads (the
// fixtures list them all; TestRun_PresetMetrics has the default
// excludes); retention by age is off, as the documentation's examples are
// years old.
const presetsConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - preset: %PRESET%
      metrics: {exclude: []}
%ZONE%
http:
  listen: "127.0.0.1:0"
store:
retention:
  raw_max_age: 0
`

// TestRun_Presets publishes each preset's messages, copied from each
// family's own documentation (gateway/payload/testdata/presets), through the
// embedded broker to a daemon that names only the preset, and checks over
// HTTP the exact readings with their units, and what the status counts
// as skipped and ignored.
func TestRun_Presets(t *testing.T) {
	fixtures := testkit.LoadFixtures(t, filepath.Join("..", "..", "gateway", "payload", "testdata", "presets"))
	type group struct{ preset, zone string }
	groups := map[group][]testkit.Fixture{}
	for _, fx := range fixtures {
		g := group{fx.Preset, fx.TimeZone}
		groups[g] = append(groups[g], fx)
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b group) int { return strings.Compare(a.preset+a.zone, b.preset+b.zone) })
	for _, g := range keys {
		t.Run(g.preset+"/"+g.zone, func(t *testing.T) {
			zone := ""
			if g.zone != "" {
				zone = "      time_zone: " + g.zone
			}
			cfg := strings.NewReplacer("%PRESET%", g.preset, "%ZONE%", zone).Replace(presetsConfig)
			d := startDaemon(t, writeConfig(t, t.TempDir(), cfg))
			api := newAPIClient(d.http)
			pub := mustConnect(t, d.mqtt, "presets-publisher")
			checkPresetFixtures(t, d, api, pub, groups[g])
		})
	}
}

// checkPresetFixtures publishes the fixtures of one preset and checks
// what the daemon made of them.
func checkPresetFixtures(t *testing.T, d *inProcess, api *apiClient, pub paho.Client, fixtures []testkit.Fixture) {
	t.Helper()
	var want []buffer.Reading
	var wantIgnored uint64
	wantSkipped := map[string]uint64{}
	wantReasons := map[string]uint64{}
	// Readings first, as each fixture says what a fresh gateway makes of
	// its message: a discovery message before them would give units
	// (TestRun_LearnedUnits).
	fixtures = slices.Clone(fixtures)
	slices.SortStableFunc(fixtures, func(a, b testkit.Fixture) int {
		return strings.Compare(a.Skip, b.Skip)
	})
	for _, fx := range fixtures {
		sent := time.Now()
		if err := publish1(pub, fx.Topic, string(fx.Payload)); err != nil {
			t.Fatalf("%s: %v", fx.Name, err)
		}
		acked := time.Now()
		switch {
		case fx.Skip != "":
			wantSkipped[fx.Skip]++
			continue
		case fx.Reject != "":
			wantReasons[fx.Reject]++
			continue
		}
		wantIgnored += uint64(fx.Ignored)
		recv := findRecv(t, api, fx, sent, acked)
		for _, r := range fx.Readings {
			ts := r.At.UnixNano()
			if r.At.IsZero() {
				ts = recv.Add(r.Offset).UnixNano()
			}
			want = append(want, buffer.Reading{Device: r.Device, Metric: r.Metric, TS: ts, Value: r.Value, Unit: r.Unit})
		}
	}
	units := map[[2]string]string{}
	for _, r := range want {
		if k := [2]string{r.Device, r.Metric}; r.Unit != "" || units[k] == "" {
			units[k] = r.Unit // the last one a reading brought; "" never erases one
		}
	}
	for i := range want {
		want[i].Unit = ""
	}
	slices.SortFunc(want, func(a, b buffer.Reading) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	want = slices.Compact(want)
	devices := map[string]bool{}
	for _, r := range want {
		devices[r.Device] = true
	}
	for dev := range devices {
		checkReadings(t, api, dev, "order=asc&limit=1000", apiReadings(want, dev, false))
	}
	checkUnits(t, api, units)

	var st struct {
		Ingest gateway.IngestStats `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", code)
	}
	if got := st.Ingest; got.Stored != uint64(len(want)) || got.Ignored != wantIgnored || !maps.Equal(got.Skipped, wantSkipped) || !maps.Equal(got.ByReason, wantReasons) {
		t.Errorf("ingest status: stored %d, ignored %d, skipped %v, rejected %v %+v; want %d, %d, %v, %v",
			got.Stored, got.Ignored, got.Skipped, got.ByReason, got.Examples, len(want), wantIgnored, wantSkipped, wantReasons)
	}
	if len(wantSkipped) > 0 {
		out, err := exec.Command(cairnBinary.get(t), "status", "-url", "http://"+d.http).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "skipped, not readings: ") {
			t.Errorf("cairn status: %v, want the skipped messages in:\n%s", err, out)
		}
		_, metrics, err := api.fetch("/metrics")
		for kind, n := range wantSkipped {
			if want := fmt.Sprintf("cairn_ingest_skipped_total{kind=%q} %d\n", kind, n); err != nil || !strings.Contains(string(metrics), want) {
				t.Errorf("/metrics: %v, want %q", err, want)
			}
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", d.log)
	}
}

// checkUnits checks the unit of each series, by device and metric, in
// /v1/devices/DEVICE.
func checkUnits(t *testing.T, api *apiClient, units map[[2]string]string) {
	t.Helper()
	for k, unit := range units {
		path := "/v1/devices/" + url.PathEscape(k[0]) + "/readings?limit=1&metric=" + url.QueryEscape(k[1])
		var got struct {
			Unit string `json:"unit"`
		}
		if code := api.get(t, path, &got); code != http.StatusOK || got.Unit != unit {
			t.Errorf("GET %s: %d, unit %q; want %q", path, code, got.Unit, unit)
		}
	}
}

// TestRun_LearnedUnits: a unit that one message names for another's
// readings — ESPHome's discovery config, Home Assistant's
// unit_of_measurement attribute — is the unit of the readings after it.
func TestRun_LearnedUnits(t *testing.T) {
	byName := map[string]testkit.Fixture{}
	for _, fx := range testkit.LoadFixtures(t, filepath.Join("..", "..", "gateway", "payload", "testdata", "presets")) {
		byName[strings.TrimSuffix(fx.Name, ".txt")] = fx
	}
	for _, tc := range []struct {
		preset, unitFrom, reading, device, metric, unit string
	}{
		{"esphome", "esphome-discovery-sensor-config", "esphome-sensor-state", "livingroom", "living_room_temperature", "°C"},
		{"homeassistant-statestream", "homeassistant-statestream-unit-of-measurement", "homeassistant-statestream-sensor-state", "sensor.outside_temperature", "state", "°C"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			cfg := strings.NewReplacer("%PRESET%", tc.preset, "%ZONE%", "").Replace(presetsConfig)
			d := startDaemon(t, writeConfig(t, t.TempDir(), cfg))
			pub := mustConnect(t, d.mqtt, "learned-units")
			for _, name := range []string{tc.unitFrom, tc.reading} {
				fx, ok := byName[name]
				if !ok {
					t.Fatalf("no fixture %s", name)
				}
				if err := publish1(pub, fx.Topic, string(fx.Payload)); err != nil {
					t.Fatal(err)
				}
			}
			checkUnits(t, newAPIClient(d.http), map[[2]string]string{{tc.device, tc.metric}: tc.unit})
		})
	}
}
