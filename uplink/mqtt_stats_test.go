package uplink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

// mqttTestUplink is an Uplink of an MQTT upstream, its defaults filled
// in, for the tests of its messages.
func mqttTestUplink(t *testing.T, payload MessageFormat, topic string, maxBytes int) *Uplink {
	t.Helper()
	opts := Options{Name: "cloud", URL: "mqtt://127.0.0.1:1883", Gateway: "gw",
		MQTT: MQTTOptions{Topic: topic, MaxMessageBytes: maxBytes, Payload: payload}}
	opts, err := withDefaults(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Group = aggregate.Minute // of statsMessages
	return &Uplink{opts: opts, log: opts.Logger}
}

// TestMQTTStatsMessages_Payloads: the records of a stats batch go per
// device and topic, in messages within MaxMessageBytes, in each payload
// format, every record once; a device SenML cannot name is left out of
// SenML only.
func TestMQTTStatsMessages_Payloads(t *testing.T) {
	start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixNano()
	var recs []statsRecord
	for _, dev := range []string{"bad dev", "dev-0", "dev-1"} {
		for _, metric := range []string{"humidity", "temperature"} {
			for m := range 20 {
				st := aggregate.Stats{Count: uint64(m + 1), Sum: float64(m) * 3.5, Min: -1.25, Max: float64(m)}
				recs = append(recs, statsRecord{device: dev, metric: metric, unit: "°C", start: start + int64(m)*60e9, stats: st})
			}
		}
	}
	for _, tc := range []struct {
		payload MessageFormat
		skipped int
	}{{0, 0}, {MessageSenML, 40}, {MessageInflux, 0}} {
		u := mqttTestUplink(t, tc.payload, "s/{gateway}/{device}", 1<<10)
		msgs, skipped := u.statsMessages("gw-7", recs)
		if skipped != tc.skipped {
			t.Errorf("%v: %d skipped, want %d", tc.payload, skipped, tc.skipped)
		}
		seen := make(map[string]int) // device, metric, start, stat
		for _, m := range msgs {
			if len(m.payload) > 1<<10 {
				t.Errorf("%v: a message of %d bytes, over 1 KiB", tc.payload, len(m.payload))
			}
			device := strings.TrimPrefix(m.topic, "s/gw/")
			for _, v := range statsValues(t, tc.payload, device, m.payload) {
				seen[v]++
			}
		}
		want := 5 * (len(recs) - tc.skipped)
		if len(seen) != want {
			t.Errorf("%v: %d values in %d messages, want %d", tc.payload, len(seen), len(msgs), want)
		}
		for v, n := range seen {
			if n != 1 {
				t.Errorf("%v: %s %d times", tc.payload, v, n)
			}
		}
		if v := fmt.Sprintf("dev-1 temperature %d mean %g", start+19*60e9, 19*3.5/20); seen[v] != 1 {
			t.Errorf("%v: no %s among %d values", tc.payload, v, len(seen))
		}
	}
}

// statsValues reads the values of a message of records of device as
// "device metric start stat value" strings.
func statsValues(t *testing.T, f MessageFormat, device string, payload []byte) []string {
	t.Helper()
	var out []string
	add := func(metric string, start int64, stat string, v float64) {
		out = append(out, fmt.Sprintf("%s %s %d %s %g", device, metric, start, stat, v))
	}
	switch f {
	case MessageSenML:
		var pack []struct {
			BN string   `json:"bn"`
			BT *float64 `json:"bt"`
			N  string   `json:"n"`
			V  float64  `json:"v"`
			ID string   `json:"cairn_id"`
		}
		if err := json.Unmarshal(payload, &pack); err != nil {
			t.Fatalf("%v: %s", err, payload)
		}
		bn, bt := "", 0.0
		for _, r := range pack {
			if r.BN != "" {
				bn = r.BN
			}
			if r.BT != nil {
				bt = *r.BT
			}
			i := strings.LastIndexByte(r.N, '_')
			if bn != "urn:dev:cairn:gw:"+device+":" || i < 0 || r.ID == "" {
				t.Fatalf("record %+v of %s", r, payload)
			}
			add(r.N[:i], int64(bt)*1e9, r.N[i+1:], r.V)
		}
	case MessageInflux:
		for _, line := range bytes.Split(bytes.TrimSuffix(payload, []byte("\n")), []byte("\n")) {
			var metric string
			var start int64
			var c, sum, lo, hi, mean float64
			head, rest, _ := strings.Cut(string(line), " count=") // a tag value may hold an escaped space
			for _, tag := range strings.Split(head, ",")[1:] {
				if m, ok := strings.CutPrefix(tag, "metric="); ok {
					metric = m
				}
			}
			if _, err := fmt.Sscanf(rest, "%gi,sum=%g,min=%g,max=%g,mean=%g %d", &c, &sum, &lo, &hi, &mean, &start); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			for i, v := range []float64{c, sum, lo, hi, mean} {
				add(metric, start, statNames[i], v)
			}
		}
	default:
		var doc struct {
			Gateway, Device, Batch, Group string
			Stats                         []struct {
				ID, Device, Metric, Start string
				Count                     uint64
				Sum, Min, Max, Mean       float64
			}
		}
		if err := json.Unmarshal(payload, &doc); err != nil {
			t.Fatalf("%v: %s", err, payload)
		}
		if doc.Gateway != "gw" || doc.Device != device || doc.Batch != "gw-7" || doc.Group != "minute" {
			t.Fatalf("message %s", payload)
		}
		for _, r := range doc.Stats {
			ts, err := time.Parse(time.RFC3339Nano, r.Start)
			if err != nil || r.Device != device || r.ID == "" {
				t.Fatalf("record %+v", r)
			}
			for i, v := range []float64{float64(r.Count), r.Sum, r.Min, r.Max, r.Mean} {
				add(r.Metric, ts.UnixNano(), statNames[i], v)
			}
		}
	}
	return out
}

// TestMQTTMessages_Seqs: each message names the readings it carries, so
// that those the broker took are not sent again after a reload; together
// they are every reading the format carries, once.
func TestMQTTMessages_Seqs(t *testing.T) {
	var rs []buffer.OutboxReading
	for i := range 200 {
		r := buffer.OutboxReading{Seq: uint64(500 + i)}
		r.Device, r.Metric, r.TS, r.Value = fmt.Sprintf("dev-%d", i%3), "t", int64(1.8e18)+int64(i)*1e9, float64(i)
		if i == 11 {
			r.Value = math.Inf(1)
		}
		rs = append(rs, r)
	}
	for _, f := range []MessageFormat{0, MessageSenML, MessageInflux} {
		u := mqttTestUplink(t, f, DefaultTopic, 1<<10)
		msgs, skipped := u.mqttMessages("gw-500", rs)
		seen := make(map[uint64]int)
		for _, m := range msgs {
			for _, seq := range m.seqs {
				seen[seq]++
			}
		}
		if skipped != 1 || len(seen) != 199 || seen[511] != 0 {
			t.Errorf("%v: %d skipped, %d readings named, reading 511 %d times; want 1, 199 and 0", f, skipped, len(seen), seen[511])
		}
		for seq, n := range seen {
			if n != 1 {
				t.Errorf("%v: reading %d in %d messages", f, seq, n)
			}
		}
	}
}
