package uplink_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/uplink"
)

// payloadReadings returns readings of two devices, with nanosecond
// times, units and values of every kind, in the order of a batch.
func payloadReadings() []buffer.OutboxReading {
	base := time.Date(2026, 11, 28, 0, 0, 0, 123456789, time.UTC).UnixNano()
	var rs []buffer.OutboxReading
	add := func(device, metric, unit string, ts int64, v float64) {
		r := buffer.OutboxReading{Seq: uint64(100 + len(rs))}
		r.Device, r.Metric, r.Unit, r.TS, r.Value = device, metric, unit, ts, v
		rs = append(rs, r)
	}
	for i := range 20 {
		ts := base + int64(i)*1_500_000_001
		add("kitchen", "temperature", "Cel", ts, 21.5+float64(i)/7)
		add("kitchen", "humidity", "%RH", ts, 40)
		add("shelly-1/relay.0", "power", "", ts-999_999_999, -1e-9*float64(i))
		add("kitchen", "count", "", ts+1, float64(1<<53)+float64(i*2))
	}
	add("kitchen", "early", "", base-5_000_000_000, 1.7976931348623157e308)
	return rs
}

// decodeSenML decodes a body with cairn's own SenML decoder, as a
// subscriber of the upstream's broker would read it.
func decodeSenML(t *testing.T, body []byte) []buffer.Reading {
	t.Helper()
	var d payload.Decoder
	out, ignored, err := d.Decode(nil, payload.FormatSenML, body, "", "", time.Now())
	if err != nil || ignored != 0 {
		t.Fatalf("decode %s: ignored %d, %v", body, ignored, err)
	}
	return out
}

// wantSenML is r as cairn's SenML decoder reads it back without a topic
// that names the device: the device is the base name.
func wantSenML(gw string, r buffer.OutboxReading) buffer.Reading {
	w := r.Reading
	w.Device = "urn:dev:cairn:" + gw + ":" + r.Device
	return w
}

func TestMessageEncoder_SenMLParsesBack(t *testing.T) {
	rs := payloadReadings()
	for _, maxBytes := range []int{0, 128 * 1024, 1000, 300} {
		e := uplink.NewMessageEncoder(uplink.MessageSenML, "pi-kitchen", "")
		msgs, skipped := e.Split(nil, rs, maxBytes)
		if skipped != 0 {
			t.Errorf("max %d: skipped %d", maxBytes, skipped)
		}
		var got []buffer.Reading
		for _, m := range msgs {
			if m.Err != nil {
				t.Fatalf("max %d: %v", maxBytes, m.Err)
			}
			got = append(got, decodeSenML(t, m.Body)...)
		}
		if len(got) != len(rs) {
			t.Fatalf("max %d: %d readings back in %d messages, want %d", maxBytes, len(got), len(msgs), len(rs))
		}
		for i, r := range rs {
			if want := wantSenML("pi-kitchen", r); got[i] != want {
				t.Errorf("max %d: reading %d: got %+v, want %+v", maxBytes, i, got[i], want)
			}
		}
		if maxBytes == 0 && len(msgs) != 1 {
			t.Errorf("no limit: %d messages, want 1", len(msgs))
		}
		if maxBytes == 300 && len(msgs) < len(rs)/2 {
			t.Errorf("max 300: %d messages for %d readings", len(msgs), len(rs))
		}
	}
}

// TestMessageEncoder_SenMLFields checks the pack's fields as a generic
// JSON reader sees them: the base name and time in the first record,
// times relative to it, and each reading's cairn_id.
func TestMessageEncoder_SenMLFields(t *testing.T) {
	rs := payloadReadings()[:3]
	e := uplink.NewMessageEncoder(uplink.MessageSenML, "pi-kitchen", "")
	msgs, _ := e.Split(nil, rs, 0)
	var pack []map[string]any
	if err := json.Unmarshal(msgs[0].Body, &pack); err != nil {
		t.Fatalf("%s: %v", msgs[0].Body, err)
	}
	if got, want := pack[0]["bn"], "urn:dev:cairn:pi-kitchen:kitchen:"; got != want {
		t.Errorf("bn: got %v, want %v", got, want)
	}
	if got, want := pack[0]["bt"], float64(rs[0].TS/1e9); got != want {
		t.Errorf("bt: got %v, want %v", got, want)
	}
	if got, want := pack[0]["t"], 0.123456789; got != want {
		t.Errorf("t: got %v, want %v", got, want)
	}
	if _, ok := pack[1]["bn"]; ok {
		t.Errorf("record 1 of the same device repeats bn: %v", pack[1])
	}
	if got, want := pack[2]["bn"], "urn:dev:cairn:pi-kitchen:shelly-1/relay.0:"; got != want {
		t.Errorf("record 2 of another device: bn %v, want %v", got, want)
	}
	ids := map[any]bool{}
	for i, rec := range pack {
		id, _ := rec["cairn_id"].(string)
		if !strings.HasSuffix(id, "-"+rs[i].Device+"-"+"00000000000000"+string("0123456789abcdef"[rs[i].Seq>>4])+string("0123456789abcdef"[rs[i].Seq&0xf])) {
			t.Errorf("record %d: cairn_id %q, want the reading's id", i, id)
		}
		ids[id] = true
	}
	if len(ids) != len(pack) {
		t.Errorf("%d ids for %d records", len(ids), len(pack))
	}
}

// TestMessageEncoder_Skips checks the readings each format cannot carry
// are counted, not sent, and still belong to a message.
func TestMessageEncoder_Skips(t *testing.T) {
	rs := payloadReadings()[:2]
	bad := []buffer.OutboxReading{rs[0], rs[0], rs[0], rs[0]}
	bad[0].Value = math.NaN()
	bad[1].Device = "Küche Temperatur" // not a SenML name
	bad[2].TS = 1 << 27 * 1e9          // SenML would read it as relative
	bad[3].Metric = `ends\`            // neither format can write it
	rs = append(append(bad[:2:2], rs...), bad[2:]...)
	for _, c := range []struct {
		f    uplink.MessageFormat
		skip int
	}{{uplink.MessageSenML, 4}, {uplink.MessageInflux, 2}} {
		e := uplink.NewMessageEncoder(c.f, "pi", "")
		msgs, skipped := e.Split(nil, rs, 0)
		if skipped != c.skip {
			t.Errorf("%s: skipped %d, want %d", c.f, skipped, c.skip)
		}
		if len(msgs) != 1 || len(msgs[0].Readings) != len(rs) {
			t.Errorf("%s: %d messages, want 1 standing for all %d readings", c.f, len(msgs), len(rs))
		}
	}
}

func TestMessageEncoder_SplitRespectsMax(t *testing.T) {
	rs := payloadReadings()
	for _, f := range []uplink.MessageFormat{uplink.MessageSenML, uplink.MessageInflux} {
		e := uplink.NewMessageEncoder(f, "pi-kitchen", "")
		whole, _ := e.Split(nil, rs, 0)
		for _, maxBytes := range []int{len(whole[0].Body), len(whole[0].Body) - 1, 4096, 512, 250} {
			msgs, _ := e.Split(nil, rs, maxBytes)
			n := 0
			for i, m := range msgs {
				if m.Err != nil {
					t.Fatalf("%s max %d: %v", f, maxBytes, m.Err)
				}
				if len(m.Body) > maxBytes {
					t.Errorf("%s max %d: message %d has %d bytes", f, maxBytes, i, len(m.Body))
				}
				if &m.Readings[0] != &rs[n] {
					t.Errorf("%s max %d: message %d starts at another reading than %d", f, maxBytes, i, n)
				}
				n += len(m.Readings)
			}
			if n != len(rs) {
				t.Errorf("%s max %d: messages stand for %d readings, want %d", f, maxBytes, n, len(rs))
			}
			if maxBytes == len(whole[0].Body) && len(msgs) != 1 {
				t.Errorf("%s: a limit of the whole body's size gives %d messages, want 1", f, len(msgs))
			}
			if maxBytes < len(whole[0].Body) && len(msgs) < 2 {
				t.Errorf("%s max %d: %d messages, want more than 1", f, maxBytes, len(msgs))
			}
		}
	}
}

func TestMessageEncoder_TooLarge(t *testing.T) {
	rs := payloadReadings()[:3]
	rs[1].Metric = strings.Repeat("m", 200)
	for _, f := range []uplink.MessageFormat{uplink.MessageSenML, uplink.MessageInflux} {
		e := uplink.NewMessageEncoder(f, "pi", "")
		msgs, _ := e.Split(nil, rs, 180)
		if len(msgs) != 3 {
			t.Fatalf("%s: %d messages, want 3 (one an error)", f, len(msgs))
		}
		var tooLarge *uplink.MessageTooLargeError
		if !errors.As(msgs[1].Err, &tooLarge) || msgs[1].Body != nil || tooLarge.Seq != rs[1].Seq || tooLarge.Size <= 180 || tooLarge.Max != 180 {
			t.Errorf("%s: message 1: %+v, want the second reading too large", f, msgs[1])
		}
		if msgs[0].Err != nil || msgs[2].Err != nil || len(msgs[1].Readings) != 1 || &msgs[1].Readings[0] != &rs[1] {
			t.Errorf("%s: %+v", f, msgs)
		}
	}
}

func TestParseMessageFormat(t *testing.T) {
	for _, s := range []string{"senml", "influx"} {
		f, err := uplink.ParseMessageFormat(s)
		if err != nil || f.String() != s {
			t.Errorf("%q: got %v, %v", s, f, err)
		}
	}
	if _, err := uplink.ParseMessageFormat("cbor"); err == nil {
		t.Error("cbor: no error")
	}
}
