package main

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/uplink"
)

// TestMessageInflux_InfluxDBReadsItBack writes the line protocol bodies of
// an MQTT upstream, split at a size limit, to a real InfluxDB 1.x and
// reads every reading back, names with spaces, commas and equals signs
// included.
func TestMessageInflux_InfluxDBReadsItBack(t *testing.T) {
	db := newInfluxDB(t)
	db.start(t)
	defer db.stop(t)

	base := time.Date(2026, 11, 28, 0, 0, 0, 123456789, time.UTC).UnixNano()
	var rs []buffer.OutboxReading
	want := make(map[upstreamKey]float64)
	for i := range 50 {
		for _, s := range []struct{ device, metric, unit string }{
			{"kitchen", "temperature", "°C"},
			{"Küche Temperatur", "rel hum,=%", "%RH"},
			{"shelly-1/relay.0", "power", ""},
		} {
			r := buffer.OutboxReading{Seq: uint64(len(rs))}
			r.Device, r.Metric, r.Unit = s.device, s.metric, s.unit
			r.TS, r.Value = base+int64(i)*1_000_000_001, float64(i)/3-7
			rs = append(rs, r)
			want[upstreamKey{gateway: "pi-kitchen", device: s.device, metric: s.metric, unit: s.unit, ts: r.TS}] = r.Value
		}
	}
	e := uplink.NewMessageEncoder(uplink.MessageInflux, "pi-kitchen", "")
	msgs, skipped := e.Split(nil, rs, 300)
	if skipped != 0 || len(msgs) < 10 {
		t.Fatalf("%d messages, %d skipped: want many, none skipped", len(msgs), skipped)
	}
	for i, m := range msgs {
		if m.Err != nil || len(m.Body) > 300 {
			t.Fatalf("message %d: %d bytes, %v", i, len(m.Body), m.Err)
		}
		resp, err := http.Post(db.writeURL(), "text/plain", bytes.NewReader(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("message %d: %s: %s\n%s", i, resp.Status, b, m.Body)
		}
	}
	got, total := db.readings(t)
	if total != len(rs) {
		t.Errorf("InfluxDB holds %d samples, want %d", total, len(rs))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%+v: got %v (%t), want %v", k, g, ok, v)
		}
	}
}
