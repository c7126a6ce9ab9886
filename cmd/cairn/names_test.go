package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

// namesConfig reads JSON documents that name their device, and zigbee2mqtt
// friendly names, and sends everything to a real upstream.
const namesConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - pattern: "names"
      format: json
    - preset: zigbee2mqtt
http:
  listen: "127.0.0.1:0"
retention:
  raw_max_age: 0
` + uplinkSection

// nameCase is a device id and metric name as a real system writes them.
type nameCase struct{ device, metric string }

var namesAsSent = []nameCase{
	{"kitchen/door", "temperature"},         // a Zigbee2MQTT friendly name, and a unit
	{"sensor.outside_temperature", "state"}, // a Home Assistant entity id
	{"Küche Süd", "Außen temp"},             // spaces and accents
	{"温室 1", "温度"},                          // not Latin at all
	{"a,b=c d", "x=y,z w"},                  // line protocol's special bytes
	{`quote"back\slash`, `back\slash`},      // JSON's
	{"switch:0", "switch:0.apower"},         // Shelly's components
}

// TestUplink_NamesAsSent sends device ids and metric names with '/',
// spaces, accents and line protocol's special bytes through MQTT, reads
// them back over HTTP (the device percent-encoded in the path), and finds
// them unchanged in a real VictoriaMetrics and InfluxDB, with the unit a
// preset gave as a tag.
func TestUplink_NamesAsSent(t *testing.T) {
	for _, tc := range upstreams {
		t.Run(tc.name, func(t *testing.T) {
			up := tc.new(t)
			up.start(t)
			p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), strings.ReplaceAll(namesConfig, "%URL%", up.writeURL())))
			c := mustConnect(t, p.mqtt, "names")
			want := map[upstreamKey]float64{}
			for i, nc := range namesAsSent {
				ts := t0 + int64(i)
				payload := fmt.Sprintf(`{"device":%q,"ts":%d,%q:%d}`, nc.device, ts, nc.metric, i+1)
				topic, unit := "names", ""
				if nc.device == "kitchen/door" {
					topic, unit = "zigbee2mqtt/"+nc.device, "°C"
					payload = fmt.Sprintf(`{"last_seen":%d,"temperature":%d}`, ts, i+1)
				}
				waitToken(t, c.Publish(topic, 1, false, payload))
				want[upstreamKey{gateway: "gw-test", device: nc.device, metric: nc.metric, unit: unit, ts: ts * 1e6}] = float64(i + 1)
			}
			api := newAPIClient(p.http)
			for k, v := range want {
				path := "/v1/devices/" + url.PathEscape(k.device) + "/readings?metric=" + url.QueryEscape(k.metric)
				var got readingsDoc
				if code := api.get(t, path, &got); code != http.StatusOK || got.Device != k.device || len(got.Readings) != 1 ||
					got.Readings[0].Value != v || got.Readings[0].TS != msTS(k.ts/1e6) {
					t.Errorf("GET %s: %d %+v, want device %q value %v at %s", path, code, got, k.device, v, msTS(k.ts/1e6))
				}
			}
			var devices struct {
				Devices []struct {
					Device string `json:"device"`
				} `json:"devices"`
			}
			if code := api.get(t, "/v1/devices", &devices); code != http.StatusOK || len(devices.Devices) != len(namesAsSent) {
				t.Errorf("GET /v1/devices: %d %+v, want %d devices", code, devices, len(namesAsSent))
			}
			waitSent(t, api)
			got, total := up.readings(t)
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("upstream: %+v = %v, %v; want %v", k, g, ok, v)
				}
			}
			if total != len(want) {
				t.Errorf("upstream holds %d samples, want %d: %v", total, len(want), got)
			}
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn: %v\n%s", err, p.out)
			}
		})
	}
}
