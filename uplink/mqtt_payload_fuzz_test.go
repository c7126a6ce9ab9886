package uplink_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/uplink"
)

// FuzzMessageEncoder_Split splits n readings of two devices at a limit:
// every body is within it, the messages stand for every reading once and
// in order, SenML bodies are JSON that cairn's decoder reads back as the
// readings they carry, and line protocol has a line per reading carried.
func FuzzMessageEncoder_Split(f *testing.F) {
	f.Add(true, "kitchen", "temperature", "Cel", int64(1764288000123456789), 21.5, uint8(10), uint16(200))
	f.Add(false, "shelly 1", "power,total", "W", int64(1764288000000000000), -0.0, uint8(40), uint16(90))
	f.Add(true, "a:b/c.d", "x_y-z", "", int64(946684800000000001), 1e300, uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, senml bool, device, metric, unit string, ts int64, value float64, n uint8, maxBytes uint16) {
		// Times from 2000 (cairn's decoder stamps earlier ones anew) to
		// 2262.
		const from = 946684801 * int64(time.Second)
		ts = from + int64(uint64(ts)%uint64(math.MaxInt64-from-1<<40))
		rs := make([]buffer.OutboxReading, int(n%64)+1)
		for i := range rs {
			r := &rs[i]
			r.Seq, r.Device, r.Metric, r.Unit = uint64(i)*7, device, metric, unit
			r.TS, r.Value = ts+int64(i%5)*1_000_000_007-int64(i%3)*999, value+float64(i)
			if i%4 == 3 {
				r.Device = "other"
			}
		}
		format := uplink.MessageInflux
		if senml {
			format = uplink.MessageSenML
		}
		e := uplink.NewMessageEncoder(format, "gw-1", "")
		msgs, skipped := e.Split(nil, rs, int(maxBytes))
		stood, carried, refused := 0, 0, 0
		for i, m := range msgs {
			if len(m.Readings) == 0 || &m.Readings[0] != &rs[stood] {
				t.Fatalf("message %d does not start at reading %d", i, stood)
			}
			stood += len(m.Readings)
			if m.Err != nil {
				if m.Body != nil {
					t.Fatalf("message %d: an error and a body", i)
				}
				refused++
				continue
			}
			if maxBytes > 0 && len(m.Body) > int(maxBytes) {
				t.Fatalf("message %d: %d bytes, over %d", i, len(m.Body), maxBytes)
			}
			if !senml {
				carried += bytes.Count(m.Body, []byte("\n"))
				continue
			}
			if !json.Valid(m.Body) {
				t.Fatalf("message %d is not JSON: %s", i, m.Body)
			}
			var d payload.Decoder
			out, _, err := d.Decode(nil, payload.FormatSenML, m.Body, "", "", time.Now())
			if err != nil {
				// cairn's decoder takes only names it would store.
				if encoding.CheckMetric(metric) == "" && len("urn:dev:cairn:gw-1:"+device) <= encoding.MaxDeviceLen {
					t.Fatalf("message %d: %v\n%s", i, err, m.Body)
				}
				carried += bytes.Count(m.Body, []byte(`"cairn_id"`))
				continue
			}
			carried += len(out)
			var want []buffer.OutboxReading
			for _, r := range m.Readings {
				if !math.IsNaN(r.Value) && !math.IsInf(r.Value, 0) && uplink.SenMLName(r.Device) && uplink.SenMLName(r.Metric) {
					want = append(want, r)
				}
			}
			if len(out) != len(want) {
				t.Fatalf("message %d: %d readings back, want %d\n%s", i, len(out), len(want), m.Body)
			}
			for j, got := range out {
				if w := want[j]; got.Device != "urn:dev:cairn:gw-1:"+w.Device || got.TS != w.TS || got.Value != w.Value {
					t.Fatalf("message %d: read back %+v, want %+v", i, got, w)
				}
				// The store keeps only units that are names
				// (encoding.ValidUnit); the decoder drops others.
				if got.Metric != metric || got.Unit != unit && encoding.CheckName(unit, encoding.MaxUnitLen) == "" {
					t.Fatalf("message %d: read back %+v, want metric %q unit %q", i, got, metric, unit)
				}
			}
		}
		if len(msgs) > 0 && stood != len(rs) {
			t.Fatalf("messages stand for %d readings, want %d", stood, len(rs))
		}
		if carried+skipped+refused != len(rs) {
			t.Fatalf("%d carried, %d skipped, %d refused: want %d in all", carried, skipped, refused, len(rs))
		}
	})
}
