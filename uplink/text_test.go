package uplink

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
)

// textReading is a text reading of the outbox.
func textReading(seq uint64, device, metric string, ts int64, text string) buffer.OutboxReading {
	return buffer.OutboxReading{Seq: seq, Reading: buffer.Reading{Device: device, Metric: metric, TS: ts, Text: text}}
}

// The time of the docs' examples, 2026-11-22T01:16:11Z, in ns.
const docTS = 1795310171000000000

func TestEncoder_InfluxTextAsStringField(t *testing.T) {
	e := newEncoder(Influx, "readings", "gw")
	rs := []buffer.OutboxReading{
		textReading(1, "thermostat", "mode", 5, "heat"),
		outboxReading("thermostat", "temp", "", 5, 21.5),         // the same line
		textReading(2, "btn", "action", 6, `say "hi" \ C:\dir\`), // quotes and backslashes escaped
		textReading(3, "btn", "action", 7, "two\nlines"),         // no line break: skipped
		textReading(4, "btn", "ac tion=x", 8, "Größe, a=b ✓"),    // the key escaped, the text as it is
		textReading(5, "thermostat", "mode", 9, "heat\r"),        // skipped
		textReading(6, "thermostat", "mode", 10, `"`),
	}
	body, skipped := e.encode("x", rs)
	want := `readings,device=thermostat,gateway=gw mode="heat",temp=21.5 5` + "\n" +
		`readings,device=btn,gateway=gw action="say \"hi\" \\ C:\\dir\\" 6` + "\n" +
		`readings,device=btn,gateway=gw ac\ tion\=x="Größe, a=b ✓" 8` + "\n" +
		`readings,device=thermostat,gateway=gw mode="\"" 10` + "\n"
	if string(body) != want || skipped != 2 {
		t.Errorf("got (skipped %d, want 2)\n%s\nwant\n%s", skipped, body, want)
	}
}

func TestEncoder_JSONText(t *testing.T) {
	e := newEncoder(JSON, "readings", "pi-1")
	rs := []buffer.OutboxReading{
		textReading(0x4b0, "kitchen", "mode", docTS, "heat"),
		textReading(0x4b1, "door", "state", docTS+5e8, "say \"open\"\n\\ é"),
	}
	rs = append(rs, outboxReading("kitchen", "temperature", "°C", docTS, 21.5))
	rs[2].Seq = 0x4b2
	body, skipped := e.encode("pi-1-1200", rs)
	want := `{"gateway":"pi-1","batch":"pi-1-1200","readings":[` +
		`{"id":"1795310171000000000-kitchen-00000000000004b0","device":"kitchen","metric":"mode","ts":"2026-11-22T01:16:11Z","text":"heat"},` +
		`{"id":"1795310171500000000-door-00000000000004b1","device":"door","metric":"state","ts":"2026-11-22T01:16:11.5Z","text":"say \"open\"\n\\ é"},` +
		`{"id":"1795310171000000000-kitchen-00000000000004b2","device":"kitchen","metric":"temperature","unit":"°C","ts":"2026-11-22T01:16:11Z","value":21.5}]}` + "\n"
	if string(body) != want || skipped != 0 {
		t.Errorf("got (skipped %d)\n%s\nwant\n%s", skipped, body, want)
	}
}

// stateLabels are the labels of the state series of readings_mode of
// device t1.
func stateLabels(state string) [][2]string {
	return [][2]string{{"__name__", "readings_mode"}, {"device", "t1"}, {"gateway", "gw-1"}, {"state", state}}
}

func encodeProm(t *testing.T, e *encoder, rs []buffer.OutboxReading) []promTimeSeries {
	t.Helper()
	body, skipped := e.encode("b", rs)
	if skipped != 0 {
		t.Errorf("skipped %d", skipped)
	}
	got, err := decodeWriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEncoder_PrometheusStateSet(t *testing.T) {
	e := newEncoder(Prometheus, "readings", "gw-1")
	s := int64(1e9)

	// A batch: heat, heat, then cool; the sample 0 of heat goes with cool.
	batch1 := []buffer.OutboxReading{
		textReading(1, "t1", "mode", 3*s, "cool"),
		textReading(2, "t1", "mode", 1*s, "heat"), // stored late, goes first
		outboxReading("t1", "temp", "", 1*s, 20),
		textReading(3, "t1", "mode", 2*s, "heat"),
	}
	got := encodeProm(t, e, batch1)
	want := []promTimeSeries{
		{stateLabels("cool"), []promSample{{1, 3000}}},
		{stateLabels("heat"), []promSample{{1, 1000}, {1, 2000}, {0, 3000}}},
		{[][2]string{{"__name__", "readings_temp"}, {"device", "t1"}, {"gateway", "gw-1"}}, []promSample{{20, 1000}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batch 1: got\n%v\nwant\n%v", got, want)
	}

	// Batch 1 not taken upstream: the next batch knows no state before
	// it, and encodes the same twice.
	next := []buffer.OutboxReading{
		textReading(5, "t1", "mode", 4*s, "off"),
		textReading(4, "t1", "mode", 2500*1e6, "heat"), // late: before cool, the last state sent
	}
	first := mustEncode(e, next)
	if again := mustEncode(e, next); !bytes.Equal(again, first) {
		t.Errorf("a batch encoded twice differs")
	}
	got = encodeProm(t, e, next)
	want = []promTimeSeries{
		{stateLabels("heat"), []promSample{{1, 2500}, {0, 4000}}},
		{stateLabels("off"), []promSample{{1, 4000}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batch 2 alone: got\n%v\nwant\n%v", got, want)
	}
	encodeProm(t, e, batch1)
	e.sent()

	// Taken: the next batch's first reading sets the last state sent to 0,
	// and a late reading's state is 0 by the time of the last one sent.
	got = encodeProm(t, e, next)
	want = []promTimeSeries{
		{stateLabels("cool"), []promSample{{0, 4000}}},
		{stateLabels("heat"), []promSample{{1, 2500}, {0, 3000}}},
		{stateLabels("off"), []promSample{{1, 4000}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batch 2: got\n%v\nwant\n%v", got, want)
	}
	e.sent()

	// Two states within one millisecond: of each series the last sample
	// stored goes, so only the later state is 1. A text that is not
	// UTF-8 has U+FFFD in the label.
	got = encodeProm(t, e, []buffer.OutboxReading{
		textReading(6, "t1", "mode", 5*s+100, "heat"),
		textReading(7, "t1", "mode", 5*s+200, "h\xffx"),
	})
	want = []promTimeSeries{
		{stateLabels("heat"), []promSample{{0, 5000}}},
		{stateLabels("h\uFFFDx"), []promSample{{1, 5000}}},
		{stateLabels("off"), []promSample{{0, 5000}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batch 3: got\n%v\nwant\n%v", got, want)
	}
}

func mustEncode(e *encoder, rs []buffer.OutboxReading) []byte {
	body, _ := e.encode("b", rs)
	return bytes.Clone(body)
}

func TestPromStates_Bounded(t *testing.T) {
	var p promStates
	var rs []buffer.OutboxReading
	for i := range maxStateSeries + 1 {
		rs = append(rs, textReading(uint64(i), fmt.Sprintf("d%d", i), "mode", 1, "on"))
	}
	p.expand(rs)
	p.sent()
	if n := len(p.last); n == 0 || n > maxStateSeries {
		t.Errorf("remembers %d series, want 1 to %d", n, maxStateSeries)
	}
	// A series remembered gets its 0; the map never grows past the bound.
	p.expand([]buffer.OutboxReading{textReading(0, "new", "mode", 1, "on")})
	p.sent()
	if n := len(p.last); n > maxStateSeries {
		t.Errorf("remembers %d series, over %d", n, maxStateSeries)
	}
}

func TestMessageEncoder_Text(t *testing.T) {
	rs := []buffer.OutboxReading{
		textReading(0x64, "door", "state", docTS+5e8, "open"),
		textReading(0x65, "door", "action", docTS+75e7, "a \"b\"\n"),
	}
	senml := NewMessageEncoder(MessageSenML, "pi-1", "")
	msgs, skipped := senml.Split(nil, rs, 0)
	want := `[{"bn":"urn:dev:cairn:pi-1:door:","bt":1795310171,"n":"state","t":0.5,"vs":"open","cairn_id":"1795310171500000000-door-0000000000000064"},` +
		`{"n":"action","t":0.75,"vs":"a \"b\"\n","cairn_id":"1795310171750000000-door-0000000000000065"}]`
	if len(msgs) != 1 || string(msgs[0].Body) != want || skipped != 0 {
		t.Errorf("senml: got %d messages (skipped %d)\n%s\nwant\n%s", len(msgs), skipped, msgs[0].Body, want)
	}

	lines := NewMessageEncoder(MessageInflux, "pi-1", "")
	msgs, skipped = lines.Split(nil, rs, 0)
	want = `readings,device=door,gateway=pi-1 state="open" 1795310171500000000` + "\n"
	if len(msgs) != 1 || string(msgs[0].Body) != want || skipped != 1 {
		t.Errorf("influx: got %d messages (skipped %d, want 1)\n%s\nwant\n%s", len(msgs), skipped, msgs[0].Body, want)
	}

	one, ok := appendMQTTReading(nil, "pi-1", &rs[1])
	want = `{"id":"pi-1-101","metric":"action","time":"2026-11-22T01:16:11.75Z","text":"a \"b\"\n"}`
	if !ok || string(one) != want {
		t.Errorf("json: got\n%s\nwant\n%s", one, want)
	}
}

// textBatches are two batches of 5,000 text readings of 100 devices: a
// thermostat's mode that changes every fifth reading (a reading a
// minute), and a button's action, a different one each time.
func textBatches() map[string][]buffer.OutboxReading {
	modes := []string{"heat", "cool", "off", "auto"}
	actions := []string{"single", "double", "hold"}
	out := map[string][]buffer.OutboxReading{}
	for i := range 50 {
		for d := range 100 {
			ts := int64(1_700_000_000_000+i*60_000+d) * 1e6
			seq := uint64(i*100 + d)
			out["state"] = append(out["state"], textReading(seq, fmt.Sprintf("thermostat-%03d", d), "mode", ts, modes[(i/5+d)%4]))
			out["event"] = append(out["event"], textReading(seq, fmt.Sprintf("button-%03d", d), "action", ts, actions[(i+d)%3]))
		}
	}
	return out
}

// TestEncoder_BytesPerTextReading logs what a batch of text readings
// costs upstream in each format and MQTT payload, with gzip and
// without (remote write: snappy).
func TestEncoder_BytesPerTextReading(t *testing.T) {
	for _, kind := range []string{"state", "event"} {
		rs := textBatches()[kind]
		per := func(n int) float64 { return float64(n) / float64(len(rs)) }
		for _, f := range []Format{Influx, JSON, Prometheus} {
			e := newEncoder(f, "readings", "pi-kitchen")
			body, skipped := e.encode("pi-kitchen-1", rs)
			if skipped != 0 {
				t.Fatalf("%s: skipped %d", f, skipped)
			}
			if f == Prometheus {
				t.Logf("%s %-10s %6.2f bytes per reading (snappy)", kind, f, per(len(body)))
				continue
			}
			t.Logf("%s %-10s %6.2f bytes per reading, %6.2f gzipped", kind, f, per(len(body)), per(gzipLen(t, body)))
		}
		// MQTT: a message per device, as mqttMessages writes them.
		byDevice := map[string][]buffer.OutboxReading{}
		for _, r := range rs {
			byDevice[r.Device] = append(byDevice[r.Device], r)
		}
		var payloads = map[string]int{}
		for device, drs := range byDevice {
			m := mqttHead("pi-kitchen", device, "pi-kitchen-1")
			for i := range drs {
				if i > 0 {
					m = append(m, ',')
				}
				m, _ = appendMQTTReading(m, "pi-kitchen", &drs[i])
			}
			payloads["json"] += len(m) + len("]}\n")
			for _, mf := range []MessageFormat{MessageSenML, MessageInflux} {
				msgs, _ := NewMessageEncoder(mf, "pi-kitchen", "").Split(nil, drs, 128<<10)
				for _, msg := range msgs {
					payloads[mf.String()] += len(msg.Body)
				}
			}
		}
		for _, p := range []string{"json", "senml", "influx"} {
			t.Logf("%s mqtt %-6s %6.2f bytes per reading (payloads)", kind, p, per(payloads[p]))
		}
	}
}

// FuzzEncoder_PrometheusStateSet encodes a series of states, in time
// order, in two batches, the first taken upstream before the second is
// encoded, and checks what a receiver keeps (one sample per series and
// millisecond) against a brute-force state set: in each millisecond with
// readings, the state of its last reading is 1, and every other state
// that was in force at its start or read in it is 0.
func FuzzEncoder_PrometheusStateSet(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 0, 3}, uint8(3))
	f.Add([]byte{0x11, 0x02, 0x01, 0x20, 0x33, 0x00, 0x01}, uint8(1))
	f.Add([]byte{5, 9, 13, 2, 2, 2, 1}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		if len(data) > 64 {
			data = data[:64]
		}
		var rs []buffer.OutboxReading
		ts := int64(1_700_000_000_000_000_000)
		for i, b := range data {
			ts += int64(b>>2&3) * 400_000 // 0, 0.4, 0.8 or 1.2 ms later
			rs = append(rs, textReading(uint64(i), "d", "m", ts, fmt.Sprintf("s%d", b&3)))
		}
		// The second batch starts in a later millisecond than the first
		// ends: a millisecond split across batches would be sent twice.
		k := int(split) % (len(rs) + 1)
		for k > 0 && k < len(rs) && rs[k].TS/1e6 == rs[k-1].TS/1e6 {
			k++
		}
		e := newEncoder(Prometheus, "readings", "")
		got := map[string]map[int64]float64{}
		for _, batch := range [][]buffer.OutboxReading{rs[:k], rs[k:]} {
			if len(batch) == 0 {
				continue
			}
			body, skipped := e.encode("b", batch)
			ts, err := decodeWriteRequest(body)
			if err != nil || skipped != 0 {
				t.Fatalf("%v, skipped %d", err, skipped)
			}
			e.sent()
			for _, s := range ts {
				state := s.Labels[2][1]
				if s.Labels[2][0] != "state" {
					t.Fatalf("labels %q", s.Labels)
				}
				for _, smp := range s.Samples {
					if got[state] == nil {
						got[state] = map[int64]float64{}
					}
					if _, dup := got[state][smp.MS]; dup {
						t.Fatalf("state %s: two samples at %d", state, smp.MS)
					}
					got[state][smp.MS] = smp.Value
				}
			}
		}
		want := map[string]map[int64]float64{}
		put := func(state string, ms int64, v float64) {
			if want[state] == nil {
				want[state] = map[int64]float64{}
			}
			want[state][ms] = v
		}
		prev := ""
		for i := 0; i < len(rs); {
			ms := rs[i].TS / 1e6
			touched := map[string]bool{}
			if prev != "" {
				touched[prev] = true
			}
			for ; i < len(rs) && rs[i].TS/1e6 == ms; i++ {
				touched[rs[i].Text] = true
				prev = rs[i].Text
			}
			for s := range touched {
				put(s, ms, 0)
			}
			put(prev, ms, 1)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("split at %d:\n got %v\nwant %v", k, got, want)
		}
	})
}

// BenchmarkEncoder_TextFormats encodes the batches of textBatches in each
// format, with the encoder's buffers reused as the uplink reuses them
// (remote write: each batch taken, so the state before each series' first
// reading is known).
func BenchmarkEncoder_TextFormats(b *testing.B) {
	batches := textBatches()
	for _, kind := range []string{"state", "event"} {
		rs := batches[kind]
		for _, f := range []Format{Influx, JSON, Prometheus} {
			b.Run(kind+"/"+f.String(), func(b *testing.B) {
				e := newEncoder(f, "readings", "pi-kitchen")
				b.ReportAllocs()
				for b.Loop() {
					body, _ := e.encode("pi-kitchen-1", rs)
					e.sent()
					b.SetBytes(int64(len(body)))
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rs)), "ns/reading")
			})
		}
	}
}
