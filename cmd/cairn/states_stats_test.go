package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// TestRun_StatesStats publishes the modes of a thermostat as JSON string
// fields to a cairn run's broker, one of them late and one twice, and
// asks /stats how long it was in each: the seconds a brute-force reading
// of the script gives, the reading sent twice counted once.
func TestRun_StatesStats(t *testing.T) {
	bin := cairnBinary.get(t)
	c := startCairn(t, bin, writeConfig(t, t.TempDir(), telemetryConfig(`{}`, "")))
	pub := mustConnect(t, c.mqtt, "thermostat")
	base := time.Now().Truncate(time.Minute).Add(-3 * time.Hour)
	publish := func(d time.Duration, mode string) {
		t.Helper()
		doc, err := json.Marshal(map[string]any{"ts": base.Add(d).UnixMilli(), "mode": mode})
		if err != nil {
			t.Fatal(err)
		}
		waitToken(t, pub.Publish("sensors/hall/telemetry", 1, false, doc))
	}
	publish(0, "heat")
	publish(20*time.Minute+500*time.Millisecond, "cool")
	publish(50*time.Minute, "heat")
	publish(35*time.Minute, "idle") // late
	publish(0, "heat")              // again: a duplicate

	api := newAPIClient(c.http)
	type state struct {
		State   string  `json:"state"`
		Count   uint64  `json:"count"`
		Seconds float64 `json:"seconds"`
	}
	type group struct {
		Count          uint64  `json:"count"`
		States         []state `json:"states"`
		UnknownSeconds float64 `json:"unknown_seconds"`
	}
	stats := func(from, to time.Duration, g string) []group {
		t.Helper()
		var doc struct {
			Stats []group `json:"stats"`
		}
		q := url.Values{"metric": {"mode"}, "group": {g},
			"from": {base.Add(from).Format(time.RFC3339Nano)}, "to": {base.Add(to).Format(time.RFC3339Nano)}}
		if code := api.get(t, "/v1/devices/hall/stats?"+q.Encode(), &doc); code != http.StatusOK {
			t.Fatalf("stats %s: %d", q.Encode(), code)
		}
		return doc.Stats
	}
	// The readings are acknowledged once stored: all four are counted.
	waitUntil(t, 10*time.Second, "four readings of mode", func() (bool, string) {
		got := stats(0, time.Hour, "all")
		return len(got) == 1 && got[0].Count == 4, ""
	})
	for _, tt := range []struct {
		from, to time.Duration
		group    string
		want     []group
	}{
		{0, time.Hour, "all", []group{{4, []state{{"heat", 2, 20*60 + 0.5 + 10*60}, {"cool", 1, 15*60 - 0.5}, {"idle", 1, 15 * 60}}, 0}}},
		{-30 * time.Minute, 30 * time.Minute, "all", []group{{2, []state{{"heat", 1, 20*60 + 0.5}, {"cool", 1, 10*60 - 0.5}}, 30 * 60}}},
		{50 * time.Minute, 70 * time.Minute, "all", []group{{1, []state{{"heat", 1, 20 * 60}}, 0}}},
		{20 * time.Minute, 22 * time.Minute, "minute", []group{
			{1, []state{{"heat", 0, 0.5}, {"cool", 1, 59.5}}, 0},
			{0, []state{{"cool", 0, 60}}, 0},
		}},
	} {
		if got := stats(tt.from, tt.to, tt.group); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("from %v to %v by %s:\ngot  %+v\nwant %+v", tt.from, tt.to, tt.group, got, tt.want)
		}
	}
}
