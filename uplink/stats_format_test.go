package uplink

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cairn-gateway/cairn/aggregate"
)

// statsRecords are two records of one series and one of another, in
// order of device, metric and start, with names JSON must escape.
func statsRecords() []statsRecord {
	var a, b, c aggregate.Stats
	for _, v := range []float64{21.25, 21.75, 21.5} {
		a.Add(v)
	}
	b.Add(-3)
	c.Add(40)
	c.Add(42)
	const m0 = 1_795_310_160_000_000_000
	return []statsRecord{
		{device: "kitchen", metric: "temperature", unit: "°C", start: m0, stats: a},
		{device: "kitchen", metric: "temperature", unit: "°C", start: m0 + 60e9, stats: b},
		{device: `my "room"`, metric: "air.rh", start: m0, stats: c},
	}
}

// TestEncoder_StatsJSON checks the JSON of records: the document, each
// record's fields and its id.
func TestEncoder_StatsJSON(t *testing.T) {
	e := newEncoder(JSON, "readings", "pi-1")
	body, skipped := e.encodeStats("pi-1-7", aggregate.Minute, statsRecords())
	if skipped != 0 {
		t.Errorf("skipped %d", skipped)
	}
	var doc struct {
		Gateway, Batch, Group string
		Stats                 []map[string]any
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if doc.Gateway != "pi-1" || doc.Batch != "pi-1-7" || doc.Group != "minute" || len(doc.Stats) != 3 {
		t.Fatalf("document: %s", body)
	}
	want := []map[string]any{
		{"id": "1795310160000000000-minute-7:kitchen-temperature", "device": "kitchen", "metric": "temperature", "unit": "°C",
			"start": "2026-11-22T01:16:00Z", "count": 3.0, "sum": 64.5, "min": 21.25, "max": 21.75, "mean": 21.5},
		{"id": "1795310220000000000-minute-7:kitchen-temperature", "device": "kitchen", "metric": "temperature", "unit": "°C",
			"start": "2026-11-22T01:17:00Z", "count": 1.0, "sum": -3.0, "min": -3.0, "max": -3.0, "mean": -3.0},
		{"id": `1795310160000000000-minute-9:my "room"-air.rh`, "device": `my "room"`, "metric": "air.rh",
			"start": "2026-11-22T01:16:00Z", "count": 2.0, "sum": 82.0, "min": 40.0, "max": 42.0, "mean": 41.0},
	}
	if !reflect.DeepEqual(doc.Stats, want) {
		t.Errorf("got\n%v\nwant\n%v", doc.Stats, want)
	}
}

// TestEncoder_StatsPrometheus checks the remote write of records: five
// series per series of readings, labels in order, a sample per record
// at its start plus its count in milliseconds.
func TestEncoder_StatsPrometheus(t *testing.T) {
	e := newEncoder(Prometheus, "readings", "pi-1")
	body, _ := e.encodeStats("pi-1-7", aggregate.Hour, statsRecords())
	got, err := decodeWriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	const ms0 = 1_795_310_160_000
	labels := func(name, device, metric, unit string) [][2]string {
		l := [][2]string{{"__name__", name}, {"device", device}, {"gateway", "pi-1"}, {"group", "hour"}, {"metric", metric}}
		if unit != "" {
			l = append(l, [2]string{"unit", unit})
		}
		return l
	}
	var want []promTimeSeries
	for _, s := range []struct {
		stat    string
		a, b, c float64
	}{{"count", 3, 1, 2}, {"sum", 64.5, -3, 82}, {"min", 21.25, -3, 40}, {"max", 21.75, -3, 42}, {"mean", 21.5, -3, 41}} {
		want = append(want, promTimeSeries{Labels: labels("readings_stats_"+s.stat, "kitchen", "temperature", "°C"),
			Samples: []promSample{{s.a, ms0 + 3}, {s.b, ms0 + 60_000 + 1}}})
	}
	for _, s := range []struct {
		stat string
		c    float64
	}{{"count", 2}, {"sum", 82}, {"min", 40}, {"max", 42}, {"mean", 41}} {
		want = append(want, promTimeSeries{Labels: labels("readings_stats_"+s.stat, `my "room"`, "air.rh", ""),
			Samples: []promSample{{s.c, ms0 + 2}}})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}

// TestStatsMS keeps a record's samples within its period however many
// readings it counts.
func TestStatsMS(t *testing.T) {
	r := statsRecord{start: 120e9}
	for _, tc := range []struct {
		count uint64
		group aggregate.Level
		want  int64
	}{{0, aggregate.Minute, 120_000}, {60, aggregate.Minute, 120_060}, {59_999, aggregate.Minute, 179_999},
		{1 << 40, aggregate.Minute, 179_999}, {1 << 40, aggregate.Hour, 120_000 + 3_599_999}} {
		r.stats.Count = tc.count
		if got := statsMS(tc.group, &r); got != tc.want {
			t.Errorf("count %d, %v: got %d, want %d", tc.count, tc.group, got, tc.want)
		}
	}
}
