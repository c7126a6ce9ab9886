package main

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/payload"
)

// mappingConfig has two devices that send local time without an offset,
// one in a zone ahead of UTC and one behind, a document that carries its
// own ids, and limits on a metric.
const mappingConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - pattern: "tokyo/{device}"
      time_zone: Asia/Tokyo
    - pattern: "newyork/{device}"
      time_zone: America/New_York
    - pattern: "meters"
      device_field: meta.id
      time_field: meta.sent
      time_format: "02.01.2006 15:04:05"
      time_zone: Europe/Berlin
      value_field: v
      unit_field: u
      strip_prefix: data
      validate:
        power: {min: 0, max: 10000, required: true}
http:
  listen: "127.0.0.1:0"
retention:
  raw_max_age: 0
`

// TestRun_TimeZonesMappingsChecks: local times are stored at the right
// instant in a zone ahead of UTC and one behind; a mapped document gives
// its readings; a reading out of range is rejected, counted, and shown.
func TestRun_TimeZonesMappingsChecks(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), mappingConfig))
	api := newAPIClient(d.http)
	c := mustConnect(t, d.mqtt, "mapping")
	for _, m := range []struct{ topic, payload string }{
		{"tokyo/plug-jp", `{"Time":"2026-11-22T19:00:00","power":5}`},
		{"newyork/plug-us", `{"Time":"2026-11-22T05:00:00","power":6}`},
		{"meters", `{"meta":{"id":"meter 1","sent":"22.11.2026 11:00:00"},"data":{"power":{"v":"230.5","u":"W"},"energy":{"v":12,"u":"kWh"}}}`},
		{"meters", `{"meta":{"id":"meter 1","sent":"22.11.2026 11:01:00"},"data":{"power":{"v":-5,"u":"W"}}}`},
		{"meters", `{"meta":{"id":"meter 1","sent":"22.11.2026 11:02:00"},"data":{"energy":{"v":13,"u":"kWh"}}}`},
	} {
		if err := publish1(c, m.topic, m.payload); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixMilli()
	checkReadings(t, api, "plug-jp", "", []readingDoc{{TS: msTS(at), Metric: "power", Value: 5}})
	checkReadings(t, api, "plug-us", "", []readingDoc{{TS: msTS(at), Metric: "power", Value: 6}})
	checkReadings(t, api, "meter 1", "order=asc", []readingDoc{{TS: msTS(at), Metric: "energy", Value: 12}, {TS: msTS(at), Metric: "power", Value: 230.5}})
	checkUnits(t, api, map[[2]string]string{{"meter 1", "power"}: "W", {"meter 1", "energy"}: "kWh"})

	var st struct {
		Ingest gateway.IngestStats `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", code)
	}
	in := st.Ingest
	if in.ByReason[payload.ReasonOutOfRange] != 1 || in.ByReason[payload.ReasonMissingMetric] != 1 || len(in.Examples) != 2 ||
		!strings.Contains(in.Examples[1].Detail, `metric "power" = -5, want 0 to 10000`) {
		t.Errorf("rejections: %v %+v", in.ByReason, in.Examples)
	}
	out, err := exec.Command(cairnBinary.get(t), "status", "-url", "http://"+d.http).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "missing_metric 1") || !strings.Contains(string(out), "out_of_range 1") {
		t.Errorf("cairn status: %v\n%s", err, out)
	}
}
