package main

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
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
  commit_interval: 1ms
retention:
  raw_max_age: 0
`

// formatFixture is one of gateway/testdata/formats/*.txt: a payload copied
// from a format's documentation, and the readings it gives (the format of
// the files is described in gateway's formats_test.go).
type formatFixture struct {
	name, format, device, metric, reject string
	ignored, restamped                   uint64
	readings                             []fixtureReading
	payload                              []byte
}

// fixtureReading is an expected reading: its time is at, or the receive
// time plus offset when at is zero.
type fixtureReading struct {
	device, metric string
	at             time.Time
	offset         time.Duration
	value          float64
}

func loadFormatFixtures(t *testing.T) []formatFixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "gateway", "testdata", "formats", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []formatFixture
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		head, payload, ok := bytes.Cut(b, []byte("\n---\n"))
		if !ok {
			t.Fatalf("%s: no --- line", path)
		}
		fx := formatFixture{name: filepath.Base(path), payload: payload}
		for _, line := range strings.Split(string(head), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			key, val, _ := strings.Cut(line, ": ")
			switch key {
			case "format":
				fx.format = val
			case "device":
				fx.device = val
			case "metric":
				fx.metric = val
			case "reject":
				fx.reject = val
			case "ignored":
				fx.ignored, err = strconv.ParseUint(val, 10, 64)
			case "restamped":
				fx.restamped, err = strconv.ParseUint(val, 10, 64)
			case "reading":
				f := strings.Fields(val)
				if len(f) != 4 {
					t.Fatalf("%s: %q: want DEVICE METRIC TIME VALUE", path, line)
				}
				r := fixtureReading{device: f[0], metric: f[1]}
				if rest, ok := strings.CutPrefix(f[2], "recv"); !ok {
					r.at, err = time.Parse(time.RFC3339Nano, f[2])
				} else if rest != "" {
					r.offset, err = time.ParseDuration(rest)
				}
				if err == nil {
					r.value, err = strconv.ParseFloat(f[3], 64)
				}
				fx.readings = append(fx.readings, r)
			default:
				t.Fatalf("%s: unknown key %q", path, key)
			}
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
		}
		out = append(out, fx)
	}
	return out
}

// topic returns the topic that gives the fixture's {device} and {metric}.
func (fx formatFixture) topic() string {
	switch {
	case fx.device != "" && fx.metric != "":
		return "fx/" + fx.format + "/dm/" + fx.device + "/" + fx.metric
	case fx.device != "":
		return "fx/" + fx.format + "/d/" + fx.device
	case fx.metric != "":
		return "fx/" + fx.format + "/m/" + fx.metric
	}
	return "fx/" + fx.format
}

// TestRun_PayloadFormats publishes the examples of RFC 8428 (SenML) and of
// InfluxDB's line protocol reference through the embedded broker, and
// checks the exact readings over HTTP, and what the status counts.
func TestRun_PayloadFormats(t *testing.T) {
	fixtures := loadFormatFixtures(t)
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
	extra := []formatFixture{
		{name: "array of objects", format: "auto", payload: []byte(`[{"device":"arr-1","temp":"23.5","state":"ON","door":"closed"},{"device":"arr-2","ts":1700000000000,"temp":19}]`),
			readings: []fixtureReading{
				{device: "arr-1", metric: "temp", value: 23.5}, {device: "arr-1", metric: "state", value: 1}, {device: "arr-1", metric: "door", value: 0},
				{device: "arr-2", metric: "temp", at: time.UnixMilli(t0), value: 19},
			}},
		{name: "missing values", format: "auto", device: "arr-1", payload: []byte(`{"temp":"unavailable","hum":null,"co2":"NaN","pm":""}`), ignored: 4},
		{name: "a missing plain value", format: "auto", device: "arr-1", metric: "temp", payload: []byte(`unknown`), ignored: 1},
		{name: "a plain state", format: "auto", device: "arr-1", metric: "relay", payload: []byte(`OFF`),
			readings: []fixtureReading{{device: "arr-1", metric: "relay", value: 0}}},
		{name: "never-set clock", format: "auto", device: "arr-3", payload: []byte(`{"Time":"1970-01-01T00:00:42Z","temp":20.5}`), restamped: 1,
			readings: []fixtureReading{{device: "arr-3", metric: "temp", value: 20.5}}},
	}
	fixtures = append(fixtures, extra...)

	var want []buffer.Reading
	var wantIgnored, wantRestamped uint64
	wantReasons := make(map[string]uint64)
	for _, fx := range fixtures {
		sent := time.Now()
		if err := publish1(pub, fx.topic(), string(fx.payload)); err != nil {
			t.Fatalf("%s: %v", fx.name, err)
		}
		acked := time.Now()
		if fx.reject != "" {
			wantReasons[fx.reject]++
			continue
		}
		wantIgnored += fx.ignored
		wantRestamped += fx.restamped
		recv := findRecv(t, api, fx, sent, acked)
		for _, r := range fx.readings {
			ts := r.at.UnixNano()
			if r.at.IsZero() {
				ts = recv.Add(r.offset).UnixNano()
			}
			want = append(want, buffer.Reading{Device: r.device, Metric: r.metric, TS: ts, Value: r.value})
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
	if t.Failed() {
		t.Logf("log:\n%s", d.log)
	}
}

// findRecv returns the time the broker received the fixture's message,
// published at sent and acknowledged at acked, from a reading stamped
// with it; the zero time if no reading is.
func findRecv(t *testing.T, api *apiClient, fx formatFixture, sent, acked time.Time) time.Time {
	t.Helper()
	for _, r := range fx.readings {
		if !r.at.IsZero() {
			continue
		}
		from, to := sent.Add(r.offset).Add(-time.Millisecond), acked.Add(r.offset).Add(time.Millisecond)
		path := fmt.Sprintf("/v1/devices/%s/readings?metric=%s&from=%d&to=%d&order=asc", r.device, r.metric, from.UnixNano(), to.UnixNano())
		var got readingsDoc
		if code := api.get(t, path, &got); code != http.StatusOK {
			t.Fatalf("%s: GET %s: %d", fx.name, path, code)
		}
		for _, doc := range got.Readings {
			if doc.Value == r.value {
				ts, err := time.Parse(time.RFC3339Nano, doc.TS)
				if err != nil {
					t.Fatal(err)
				}
				return ts.Add(-r.offset)
			}
		}
		t.Fatalf("%s: no reading %s %s = %v received between %s and %s: %v", fx.name, r.device, r.metric, r.value, sent, acked, got.Readings)
	}
	return time.Time{}
}
