package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statsSection is an uplink that sends the minute records of data:
// stats to %URL% in %FORMAT%.
const statsSection = `uplink:
  url: %URL%
  gateway_id: gw-test
  format: %FORMAT%
  data: stats
  group: minute
  interval: 100ms
  retry_wait_min: 100ms
  retry_wait_max: 1s
`

// statsKey names one value of one record upstream: a series, a period
// (its start in ms) and the stat (count, sum, min, max or mean).
type statsKey struct {
	device, metric, stat string
	start                int64
}

// statsSample is the sample upstream that holds a statsKey's value: the
// latest of its period, and how many the period holds.
type statsSample struct {
	ms      int64
	value   float64
	samples int
}

// A statsUpstream is a real database that the uplink sends records to.
type statsUpstream interface {
	start(t *testing.T)
	stop(t *testing.T)
	writeURL() string
	// stats returns the minute records the database holds.
	stats(t *testing.T) map[statsKey]statsSample
}

// vmStats is VictoriaMetrics taking records as remote write.
type vmStats struct{ vmRemoteWrite }

// stats returns the minute records VictoriaMetrics holds, as remote
// write of data: stats wrote them: per series, period and stat, the
// latest sample within the period.
func (vm vmStats) stats(t *testing.T) map[statsKey]statsSample {
	t.Helper()
	out := make(map[statsKey]statsSample)
	for _, line := range vm.export(t, url.Values{"match[]": {`{__name__=~"readings_stats_.+"}`}, "start": {"0"}}) {
		if line.Metric["group"] != "minute" || line.Metric["gateway"] != "gw-test" {
			t.Errorf("series %v: want group minute and gateway gw-test", line.Metric)
		}
		for i, ts := range line.Timestamps {
			k := statsKey{
				device: line.Metric["device"],
				metric: line.Metric["metric"],
				stat:   strings.TrimPrefix(line.Metric["__name__"], "readings_stats_"),
				start:  ts - ts%60_000,
			}
			s := out[k]
			s.samples++
			if s.samples == 1 || ts > s.ms {
				s.ms, s.value = ts, line.Values[i]
			}
			out[k] = s
		}
	}
	return out
}

// influxStats is InfluxDB 1.x taking records as line protocol.
type influxStats struct{ *influxDB }

// stats returns the minute records InfluxDB holds: per series, period
// and stat, the point of the period.
func (db influxStats) stats(t *testing.T) map[statsKey]statsSample {
	t.Helper()
	out := make(map[statsKey]statsSample)
	db.query(t, "SELECT * FROM readings_stats", func(columns []string, values [][]any) {
		for _, row := range values {
			var k statsKey
			var ms int64
			fields := make(map[string]float64)
			for i, c := range columns {
				switch v := row[i].(type) {
				case json.Number:
					f, err := v.Float64()
					if err != nil {
						t.Fatal(err)
					}
					if c == "time" {
						ts, err := v.Int64()
						if err != nil {
							t.Fatal(err)
						}
						ms = ts / 1e6
						continue
					}
					fields[c] = f
				case string:
					switch c {
					case "device":
						k.device = v
					case "metric":
						k.metric = v
					case "group", "gateway":
						if want := map[string]string{"group": "minute", "gateway": "gw-test"}[c]; v != want {
							t.Errorf("tag %s=%s, want %s", c, v, want)
						}
					}
				}
			}
			k.start = ms - ms%60_000
			for stat, f := range fields {
				k.stat = stat
				s := out[k]
				s.samples++
				s.ms, s.value = ms, f
				out[k] = s
			}
		}
	})
	return out
}

// promStats is Prometheus taking records as remote write, with an
// out-of-order window for records sent again after a later one.
type promStats struct{ *prometheusServer }

func newPromStats(t *testing.T) promStats {
	s := newPrometheus(t)
	s.config = "storage:\n  tsdb:\n    out_of_order_time_window: 1h\n"
	return promStats{s}
}

// stats returns the minute records Prometheus holds around t0: per
// series, period and stat, the latest sample within the period, read
// with a range selector, which returns the samples as they are stored.
func (s promStats) stats(t *testing.T) map[statsKey]statsSample {
	t.Helper()
	q := url.Values{
		"query": {`{__name__=~"readings_stats_.+"}[4h]`},
		"time":  {strconv.FormatInt(t0/1000+3600, 10)},
	}
	out := make(map[statsKey]statsSample)
	for _, r := range s.rangeQuery(t, q) {
		for _, v := range r.samples {
			k := statsKey{device: r.metric["device"], metric: r.metric["metric"],
				stat: strings.TrimPrefix(r.metric["__name__"], "readings_stats_"), start: v.ms - v.ms%60_000}
			st := out[k]
			st.samples++
			if st.samples == 1 || v.ms > st.ms {
				st.ms, st.value = v.ms, v.value
			}
			out[k] = st
		}
	}
	return out
}

// gatewayStats returns what cairn's /stats answers for device and metric
// by minute from from (ms) for n minutes, by statsKey.
func gatewayStats(t *testing.T, api *apiClient, device, metric string, from int64, n int) map[statsKey]float64 {
	t.Helper()
	var doc statsDoc
	path := fmt.Sprintf("/v1/devices/%s/stats?metric=%s&group=minute&from=%s&to=%s", device, metric,
		url.QueryEscape(msTS(from)), url.QueryEscape(msTS(from+int64(n)*60_000)))
	if code := api.get(t, path, &doc); code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, code)
	}
	out := make(map[statsKey]float64)
	for _, s := range doc.Stats {
		start, err := time.Parse(time.RFC3339Nano, s.Start)
		if err != nil {
			t.Fatal(err)
		}
		k := statsKey{device: device, metric: metric, start: start.UnixMilli()}
		for stat, v := range map[string]float64{"count": float64(s.Count), "sum": s.Sum, "min": s.Min, "max": s.Max, "mean": s.Mean} {
			k.stat = stat
			out[k] = v
		}
	}
	return out
}

// checkStatsUpstream compares, value by value, the records upstream with
// cairn's own /stats for the devices' temperature and seq over n minutes
// from from, and returns the upstream's.
func checkStatsUpstream(t *testing.T, up statsUpstream, api *apiClient, devices []string, from int64, n int) map[statsKey]statsSample {
	t.Helper()
	want := make(map[statsKey]float64)
	for _, d := range devices {
		for _, m := range []string{"temperature", "seq"} {
			for k, v := range gatewayStats(t, api, d, m, from, n) {
				want[k] = v
			}
		}
	}
	if len(want) != len(devices)*2*n*5 {
		t.Fatalf("/stats: %d values, want %d (%d devices, 2 metrics, %d minutes, 5 stats)", len(want), len(devices)*2*n*5, len(devices), n)
	}
	var got map[statsKey]statsSample
	var bad []string
	waitUntil(t, time.Minute, "the upstream to hold /stats's values", func() (bool, string) {
		got, bad = up.stats(t), nil
		for k, v := range want {
			g, ok := got[k]
			if !ok || math.Abs(g.value-v) > 1e-9*math.Max(1, math.Abs(v)) {
				bad = append(bad, fmt.Sprintf("%+v: /stats %v, upstream %v (present %v)", k, v, g.value, ok))
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				bad = append(bad, fmt.Sprintf("%+v: upstream has it, /stats does not", k))
			}
		}
		sort.Strings(bad)
		return len(bad) == 0, fmt.Sprintf("%d values differ, e.g. %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
	})
	samples := 0
	for _, s := range got {
		samples += s.samples
	}
	t.Logf("upstream: %d values of %d records equal /stats's (%d samples in all)", len(got), len(got)/5, samples)
	return got
}

// TestUplink_Stats has a cairn process with data: stats, group: minute
// send to a real upstream the minute records of readings published over
// MQTT across two minutes, then of late readings into the first minute
// after it went: each time, the record of each period upstream equals
// cairn's own /stats for it (count, sum, min, max and mean). The first
// minute went again: InfluxDB (line protocol) replaced its point,
// VictoriaMetrics and Prometheus (remote write; Prometheus with an
// out-of-order window) hold it as a later sample of the period, which is
// what a query reads. Then, with the upstream down, a late
// reading into the second minute waits in a batch being tried while cairn
// is SIGKILLed; restarted, it sends that batch once the upstream is back,
// and the upstream again holds /stats's values.
func TestUplink_Stats(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		new          func(t *testing.T) statsUpstream
		replaces     bool
	}{
		{"VictoriaMetrics", "prometheus", func(t *testing.T) statsUpstream { return vmStats{vmRemoteWrite{newVictoriaMetrics(t)}} }, false},
		{"InfluxDB", "influx", func(t *testing.T) statsUpstream { return influxStats{newInfluxDB(t)} }, true},
		{"Prometheus", "prometheus", func(t *testing.T) statsUpstream { return newPromStats(t) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := tc.new(t)
			up.start(t)
			section := strings.NewReplacer("%URL%", up.writeURL(), "%FORMAT%", tc.format).Replace(statsSection)
			testStats(t, up, writeConfig(t, t.TempDir(), localConfig+section), tc.format, tc.replaces)
		})
	}
}

func testStats(t *testing.T, up statsUpstream, cfg, format string, replaces bool) {
	p := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(p.http)

	devices := []string{"stats-0", "stats-1", "stats-2"}
	first := int64((t0/60_000 + 1) * 60_000) // a minute's start, long closed
	fleet := &sensorFleet{devices: len(devices), window: 64, acks: newAckLog(0)}
	add := func(device string, ms int64) {
		i := fleet.acks.add()
		fleet.msgs = append(fleet.msgs, newSensorMessage(device, ms, i))
	}
	publish := func() statusDoc {
		t.Helper()
		if err := fleet.publish(p.mqtt, false, nil); err != nil {
			t.Fatal(err)
		}
		if n := len(fleet.acks.pending()); n > 0 {
			t.Fatalf("%d messages not acknowledged", n)
		}
		return waitSent(t, api)
	}

	// Two minutes, a message every 2 s from each device.
	for s := int64(0); s < 120; s += 2 {
		for d, dev := range devices {
			add(dev, first+s*1000+int64(d))
		}
	}
	st := publish()
	if st.Uplink.Format != format || st.Uplink.SentReadings != 360 || st.Uplink.ParkedBatches != 0 {
		t.Errorf("uplink status: %+v", *st.Uplink)
	}
	before := checkStatsUpstream(t, up, api, devices, first, 2)

	// Late readings into the first minute, after its record went.
	for s := int64(1); s < 60; s += 10 {
		for d, dev := range devices {
			add(dev, first+s*1000+int64(d))
		}
	}
	st = publish()
	if st.Uplink.SentReadings != 396 || st.Uplink.ParkedBatches != 0 {
		t.Errorf("uplink status after late readings: %+v", *st.Uplink)
	}
	after := checkStatsUpstream(t, up, api, devices, first, 2)
	for k, a := range after {
		b := before[k]
		switch {
		case k.start == first && replaces && (a.samples != 1 || a.value == b.value && k.stat != "max" && k.stat != "min"):
			t.Errorf("%+v: the first minute's point was not replaced: before %+v, after %+v", k, b, a)
		case k.start == first && !replaces && (a.samples < 2 || a.ms <= b.ms):
			t.Errorf("%+v: the first minute did not go again as a later sample: before %+v, after %+v", k, b, a)
		case k.start != first && a != b:
			t.Errorf("%+v: the second minute changed: before %+v, after %+v", k, b, a)
		}
	}

	// The upstream down, a late reading into the second minute, and
	// cairn killed while it tries to send its batch.
	up.stop(t)
	add(devices[0], first+61_001)
	if err := fleet.publish(p.mqtt, false, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, "an attempt to fail", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.LastError != "" && st.Uplink.PendingReadings == 2, fmt.Sprintf("%+v", *st.Uplink)
	})
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}
	up.start(t)
	p = startCairn(t, cairnBinary.get(t), cfg)
	api = newAPIClient(p.http)
	waitSent(t, api)
	checkStatsUpstream(t, up, api, devices, first, 2)
}
