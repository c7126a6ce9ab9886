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
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// formatsConfig routes each payload format from topics with and without
// {device} and {metric}: fx/FORMAT, fx/FORMAT/d/{device},
// fx/FORMAT/m/{metric} and fx/FORMAT/dm/{device}/{metric}. Retention by
// age is off: the specifications' examples are dated 2010 and 2011.
const formatsConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
%TOPICS%
http:
  listen: "127.0.0.1:0"
store:
retention:
  raw_max_age: 0
`

// fixtureTopic returns the topic that gives the fixture's {device} and
// {metric}.
func fixtureTopic(fx testkit.Fixture) string {
	switch {
	case fx.Device != "" && fx.Metric != "":
		return "fx/" + fx.Format + "/dm/" + fx.Device + "/" + fx.Metric
	case fx.Device != "":
		return "fx/" + fx.Format + "/d/" + fx.Device
	case fx.Metric != "":
		return "fx/" + fx.Format + "/m/" + fx.Metric
	}
	return "fx/" + fx.Format
}

// TestRun_PayloadFormats publishes the examples of RFC 8428 (SenML) and of
// InfluxDB's line protocol reference through the embedded broker, and
// checks the exact readings over HTTP, and what the status counts.
func TestRun_PayloadFormats(t *testing.T) {
	fixtures := testkit.LoadFixtures(t, filepath.Join("..", "..", "gateway", "payload", "testdata", "formats"))
	// Each fixture on a topic that names the device gets a device of its
	// own: the line protocol reference's examples write numbers and texts
	// to one field (fieldKey), and a series holds one kind.
	for i := range fixtures {
		fx := &fixtures[i]
		if fx.Device == "" {
			continue
		}
		own := fmt.Sprintf("%s-%d", fx.Device, i)
		for k := range fx.Readings {
			if fx.Readings[k].Device == fx.Device {
				fx.Readings[k].Device = own
			}
		}
		fx.Device = own
	}
	var topics strings.Builder
	for _, format := range []string{"senml", "influx", "auto"} {
		for _, tail := range []string{"", "/d/{device}", "/m/{metric}", "/dm/{device}/{metric}"} {
			fmt.Fprintf(&topics, "    - pattern: \"fx/%s%s\"\n      format: %s\n", format, tail, format)
		}
	}
	cfg := strings.Replace(formatsConfig, "%TOPICS%", strings.TrimSuffix(topics.String(), "\n"), 1)
	d := startDaemon(t, writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "formats-publisher")

	// Messages that are not from a specification: text values, missing
	// values, an array of objects and a device clock never set, on auto.
	extra := []testkit.Fixture{
		{Name: "array of objects", Format: "auto", Payload: []byte(`[{"device":"arr-1","temp":"23.5","state":"ON","door":"closed"},{"device":"arr-2","ts":1700000000000,"temp":19}]`),
			Readings: []testkit.FixtureReading{
				{Device: "arr-1", Metric: "temp", Value: 23.5}, {Device: "arr-1", Metric: "state", Value: 1}, {Device: "arr-1", Metric: "door", Value: 0},
				{Device: "arr-2", Metric: "temp", At: time.UnixMilli(t0), Value: 19},
			}},
		{Name: "missing values", Format: "auto", Device: "arr-1", Payload: []byte(`{"temp":"unavailable","hum":null,"co2":"NaN","pm":""}`), Ignored: 4},
		{Name: "a missing plain value", Format: "auto", Device: "arr-1", Metric: "temp", Payload: []byte(`unknown`), Ignored: 1},
		{Name: "a plain state", Format: "auto", Device: "arr-1", Metric: "relay", Payload: []byte(`OFF`),
			Readings: []testkit.FixtureReading{{Device: "arr-1", Metric: "relay", Value: 0}}},
		{Name: "never-set clock", Format: "auto", Device: "arr-3", Payload: []byte(`{"Time":"1970-01-01T00:00:42Z","temp":20.5}`), Restamped: 1,
			Readings: []testkit.FixtureReading{{Device: "arr-3", Metric: "temp", Value: 20.5}}},
	}
	fixtures = append(fixtures, extra...)

	var want []buffer.Reading
	units := map[[2]string]string{} // the last unit a reading of the series brought
	kinds := map[[2]string]bool{}   // whether the series holds texts
	var wantIgnored, wantRestamped uint64
	wantReasons := make(map[string]uint64)
	for _, fx := range fixtures {
		sent := time.Now()
		if err := publish1(pub, fixtureTopic(fx), string(fx.Payload)); err != nil {
			t.Fatalf("%s: %v", fx.Name, err)
		}
		acked := time.Now()
		if fx.Reject != "" {
			wantReasons[fx.Reject]++
			continue
		}
		wantIgnored += uint64(fx.Ignored)
		wantRestamped += uint64(fx.Restamped)
		recv := findRecv(t, api, fx, sent, acked)
		wrongKind := false
		for _, r := range fx.Readings {
			ts := r.At.UnixNano()
			if r.At.IsZero() {
				ts = recv.Add(r.Offset).UnixNano()
			}
			// A series holds the kind of its first reading; the store
			// refuses the other kind (the special characters example
			// writes texts and a number to one field).
			k := [2]string{r.Device, r.Metric}
			if text, ok := kinds[k]; ok && text != (r.Text != "") {
				wrongKind = true
				continue
			}
			kinds[k] = r.Text != ""
			want = append(want, buffer.Reading{Device: r.Device, Metric: r.Metric, TS: ts, Value: r.Value})
			if r.Unit != "" || units[k] == "" {
				units[k] = r.Unit // "" never erases a unit
			}
		}
		if wrongKind {
			wantReasons["wrong_kind"]++
		}
	}

	// The same reading twice is stored once (5.1.3 and 5.1.4 are the same
	// data; "1.0" and "1" are the same value).
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
		Ingest struct {
			Readings  uint64            `json:"readings"`
			Stored    uint64            `json:"stored"`
			Ignored   uint64            `json:"ignored_fields"`
			Restamped uint64            `json:"restamped"`
			ByReason  map[string]uint64 `json:"rejected_by_reason"`
		} `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", code)
	}
	if got := st.Ingest; got.Stored != uint64(len(want)) || got.Ignored != wantIgnored || got.Restamped != wantRestamped || !maps.Equal(got.ByReason, wantReasons) {
		t.Errorf("ingest status: stored %d, ignored %d, restamped %d, rejected %v; want %d, %d, %d, %v",
			got.Stored, got.Ignored, got.Restamped, got.ByReason, len(want), wantIgnored, wantRestamped, wantReasons)
	}
	out, err := exec.Command(cairnBinary.get(t), "status", "-url", "http://"+d.http).CombinedOutput()
	if want := fmt.Sprintf("%d readings given the receive time: their device's clock was never set", wantRestamped); err != nil || !strings.Contains(string(out), want) {
		t.Errorf("cairn status: %v, want %q in:\n%s", err, want, out)
	}
	if t.Failed() {
		t.Logf("log:\n%s", d.log)
	}
}

// findRecv returns the time the broker received the fixture's message,
// published at sent and acknowledged at acked, from a reading stamped
// with it; the zero time if no reading is.
func findRecv(t *testing.T, api *apiClient, fx testkit.Fixture, sent, acked time.Time) time.Time {
	t.Helper()
	for _, r := range fx.Readings {
		if !r.At.IsZero() {
			continue
		}
		from, to := sent.Add(r.Offset).Add(-time.Millisecond), acked.Add(r.Offset).Add(time.Millisecond)
		path := fmt.Sprintf("/v1/devices/%s/readings?metric=%s&from=%d&to=%d&order=asc", url.PathEscape(r.Device), url.QueryEscape(r.Metric), from.UnixNano(), to.UnixNano())
		var got readingsDoc
		if code := api.get(t, path, &got); code != http.StatusOK {
			t.Fatalf("%s: GET %s: %d", fx.Name, path, code)
		}
		for _, doc := range got.Readings {
			if doc.Value == r.Value {
				ts, err := time.Parse(time.RFC3339Nano, doc.TS)
				if err != nil {
					t.Fatal(err)
				}
				return ts.Add(-r.Offset)
			}
		}
		t.Fatalf("%s: no reading %s %s = %v received between %s and %s: %v", fx.Name, r.Device, r.Metric, r.Value, sent, acked, got.Readings)
	}
	return time.Time{}
}
