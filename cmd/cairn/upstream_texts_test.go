package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// textKey names one text reading upstream: its device, metric and time
// (ns).
type textKey struct {
	device, metric string
	ts             int64
}

// textFixture is what the text tests store: a thermostat's mode that
// changes and repeats, a button's events, a door whose texts line
// protocol must escape, and numbers beside them.
func textFixture() []buffer.Reading {
	var rs []buffer.Reading
	at := func(i int) int64 { return (t0 + int64(i)*1000) * int64(time.Millisecond) }
	for i, mode := range []string{"off", "heat", "heat", "cool", "off", "heat"} {
		rs = append(rs, buffer.Reading{Device: "t1", Metric: "mode", TS: at(i), Text: mode})
		rs = append(rs, buffer.Reading{Device: "t1", Metric: "temp", TS: at(i), Value: 20 + float64(i)/4, Unit: "°C"})
		rs = append(rs, buffer.Reading{Device: "t1", Metric: "setpoint", TS: at(i), Value: 19 + float64(i)}) // on mode's line
	}
	for i, action := range []string{"single", "double", "single", "hold"} {
		rs = append(rs, buffer.Reading{Device: "btn", Metric: "action", TS: at(i) + 500*int64(time.Millisecond), Text: action})
	}
	for i, text := range []string{`say "hi"`, `C:\dir\`, "température ✓", "a,b=c d"} {
		rs = append(rs, buffer.Reading{Device: "door", Metric: "state", TS: at(10 + i), Text: text})
	}
	return rs
}

// textsOf returns the text readings of rs by key.
func textsOf(rs []buffer.Reading) map[textKey]string {
	out := make(map[textKey]string)
	for _, r := range rs {
		if r.IsText() {
			out[textKey{r.Device, r.Metric, r.TS}] = r.Text
		}
	}
	return out
}

// storeTexts stores textFixture in a store in dataDir, pending for the
// upstream default, and closes it: the cairn started on dataDir then
// sends them.
func storeTexts(t *testing.T, dataDir string) []buffer.Reading {
	t.Helper()
	s, err := buffer.Open(buffer.Options{Dir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cursor(defaultUpstream); err != nil {
		t.Fatal(err)
	}
	w := buffer.NewWriter(s, buffer.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	rs := textFixture()
	res := make(chan buffer.Result, 1)
	if err := w.Submit(ctx, rs, func(r buffer.Result) { res <- r }); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.Err != nil || r.Stored != len(rs) {
		t.Fatalf("store: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return rs
}

// sendTexts stores textFixture, starts cairn with the uplink section
// uplinkYAML, and waits until it sent everything.
func sendTexts(t *testing.T, uplinkYAML string) []buffer.Reading {
	t.Helper()
	dataDir := t.TempDir()
	rs := storeTexts(t, dataDir)
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, dataDir, localConfig+uplinkYAML))
	st := waitSent(t, newAPIClient(p.http))
	if st.Uplink.ParkedBatches != 0 || st.Uplink.Skipped != 0 || st.Uplink.SentReadings != uint64(len(rs)) {
		t.Errorf("uplink status: %+v, want %d sent, none skipped or parked", *st.Uplink, len(rs))
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
	return rs
}

// wantStateSet is the state set of the text readings of rs, as remote
// write sends it: per series and state, its samples (ms → value).
func wantStateSet(rs []buffer.Reading) map[string]map[int64]float64 {
	byKey := map[[2]string][]buffer.Reading{}
	for _, r := range rs {
		if r.IsText() {
			k := [2]string{r.Device, r.Metric}
			byKey[k] = append(byKey[k], r)
		}
	}
	out := map[string]map[int64]float64{}
	set := func(device, metric, state string, ms int64, v float64) {
		k := device + "/" + metric + "/" + state
		if out[k] == nil {
			out[k] = map[int64]float64{}
		}
		out[k][ms] = v
	}
	for _, series := range byKey {
		sort.SliceStable(series, func(i, j int) bool { return series[i].TS < series[j].TS })
		for i, r := range series {
			set(r.Device, r.Metric, r.Text, r.TS/1e6, 1)
			if i > 0 && series[i-1].Text != r.Text {
				set(r.Device, r.Metric, series[i-1].Text, r.TS/1e6, 0)
			}
		}
	}
	return out
}

// addStateSample adds a sample of a state series, as an upstream gives
// it back, to got.
func addStateSample(t *testing.T, got map[string]map[int64]float64, labels map[string]string, ms int64, v float64) {
	t.Helper()
	metric, ok := strings.CutPrefix(labels["__name__"], "readings_")
	if !ok || labels["state"] == "" {
		return // a number's series
	}
	if labels["gateway"] != "gw-test" {
		t.Errorf("series %v: gateway %q", labels, labels["gateway"])
	}
	k := labels["device"] + "/" + metric + "/" + labels["state"]
	if got[k] == nil {
		got[k] = map[int64]float64{}
	}
	got[k][ms] = v
}

// TestUplink_TextsToInfluxDB stores text readings, has cairn send them as
// line protocol to a real InfluxDB 1.x, and reads each text back exactly
// as a string field, numbers beside them.
func TestUplink_TextsToInfluxDB(t *testing.T) {
	db := newInfluxDB(t)
	db.start(t)
	rs := sendTexts(t, strings.ReplaceAll(uplinkSection, "%URL%", db.writeURL()))
	gotTexts, numbers := influxTexts(t, db)
	if want := textsOf(rs); !reflect.DeepEqual(gotTexts, want) {
		t.Errorf("texts in InfluxDB:\n got %v\nwant %v", gotTexts, want)
	}
	if numbers != 12 {
		t.Errorf("%d numbers in InfluxDB, want 12", numbers)
	}
}

// influxTexts returns the string fields of InfluxDB's measurement
// readings by device, field and time, and how many number fields it
// holds.
func influxTexts(t *testing.T, db *influxDB) (map[textKey]string, int) {
	t.Helper()
	gotTexts := make(map[textKey]string)
	numbers := 0
	db.query(t, "SELECT * FROM readings", func(columns []string, values [][]any) {
		for _, row := range values {
			var k textKey
			fields := map[string]any{}
			for i, c := range columns {
				switch c {
				case "time":
					ts, err := row[i].(json.Number).Int64()
					if err != nil {
						t.Fatal(err)
					}
					k.ts = ts
				case "device":
					k.device, _ = row[i].(string)
				case "gateway", "unit":
				default:
					if row[i] != nil {
						fields[c] = row[i]
					}
				}
			}
			for m, v := range fields {
				switch v := v.(type) {
				case string:
					gotTexts[textKey{k.device, m, k.ts}] = v
				case json.Number:
					numbers++
				default:
					t.Errorf("field %s of %+v: %T %v", m, k, v, v)
				}
			}
		}
	})
	return gotTexts, numbers
}

// TestUplink_TextsLineProtocolToVictoriaMetrics shows what
// docs/uplink.md says: VictoriaMetrics takes line protocol string fields
// and keeps each as the sample 0, and the numbers on their lines as they
// are.
func TestUplink_TextsLineProtocolToVictoriaMetrics(t *testing.T) {
	vm := newVictoriaMetrics(t)
	vm.start(t)
	rs := sendTexts(t, strings.ReplaceAll(uplinkSection, "%URL%", vm.writeURL()))
	got := map[textKey]float64{}
	for _, s := range vm.export(t, url.Values{"match[]": {`{__name__=~"readings_(mode|action|state)"}`}, "start": {"0"}}) {
		for i, ms := range s.Timestamps {
			got[textKey{s.Metric["device"], strings.TrimPrefix(s.Metric["__name__"], "readings_"), ms * 1e6}] = s.Values[i]
		}
	}
	want := map[textKey]float64{}
	for k := range textsOf(rs) {
		want[k] = 0
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("VictoriaMetrics:\n got %v\nwant %v", got, want)
	}
	gotNumbers, wantNumbers := map[int64]float64{}, map[int64]float64{}
	for _, r := range rs {
		if r.Metric == "setpoint" {
			wantNumbers[r.TS/1e6] = r.Value
		}
	}
	for _, s := range vm.export(t, url.Values{"match[]": {`readings_setpoint{device="t1"}`}, "start": {"0"}}) {
		for i, ms := range s.Timestamps {
			gotNumbers[ms] = s.Values[i]
		}
	}
	if !reflect.DeepEqual(gotNumbers, wantNumbers) {
		t.Errorf("numbers beside the texts in VictoriaMetrics:\n got %v\nwant %v", gotNumbers, wantNumbers)
	}
}

// TestUplink_TextsRemoteWrite stores text readings, has cairn send them
// as remote write to a real Prometheus and a real VictoriaMetrics, and
// reads back the state set: per state a series, 1 from each reading of
// it, 0 from the next reading of another state; and at any reading's
// time the query `readings_mode == 1` answers its state alone.
func TestUplink_TextsRemoteWrite(t *testing.T) {
	t.Run("Prometheus", func(t *testing.T) {
		prom := newPrometheus(t)
		prom.start(t)
		rs := sendTexts(t, strings.ReplaceAll(uplinkSection, "%URL%", prom.writeURL())+"  format: prometheus\n")
		got := map[string]map[int64]float64{}
		at := strconv.FormatInt(t0/1000+3600, 10)
		for _, s := range prom.rangeQuery(t, url.Values{"query": {`{__name__=~"readings_.+"}[4h]`}, "time": {at}}) {
			for _, v := range s.samples {
				addStateSample(t, got, s.metric, v.ms, v.value)
			}
		}
		if want := wantStateSet(rs); !reflect.DeepEqual(got, want) {
			t.Errorf("state set in Prometheus:\n got %v\nwant %v", got, want)
		}
		for _, r := range rs {
			if r.Device != "t1" || r.Metric != "mode" {
				continue
			}
			q := url.Values{"query": {`readings_mode{device="t1"} == 1`}, "time": {fmt.Sprintf("%.3f", float64(r.TS)/1e9)}}
			var states []string
			for _, s := range prom.instantQuery(t, q) {
				states = append(states, s["state"])
			}
			if len(states) != 1 || states[0] != r.Text {
				t.Errorf("at %d: states at 1 %q, want [%q]", r.TS, states, r.Text)
			}
		}
	})
	t.Run("VictoriaMetrics", func(t *testing.T) {
		vm := vmRemoteWrite{newVictoriaMetrics(t)}
		vm.start(t)
		rs := sendTexts(t, strings.ReplaceAll(uplinkSection, "%URL%", vm.writeURL())+"  format: prometheus\n")
		got := map[string]map[int64]float64{}
		for _, s := range vm.export(t, url.Values{"match[]": {`{__name__=~"readings_.+"}`}, "start": {"0"}}) {
			for i, ms := range s.Timestamps {
				addStateSample(t, got, s.Metric, ms, s.Values[i])
			}
		}
		if want := wantStateSet(rs); !reflect.DeepEqual(got, want) {
			t.Errorf("state set in VictoriaMetrics:\n got %v\nwant %v", got, want)
		}
	})
}

// TestUplink_TextsOverMQTT stores text readings, has cairn publish them
// to a real Mosquitto in each payload, and reads each text back from the
// messages a subscriber gets: "text" in JSON, vs in SenML, and line
// protocol's string fields from the InfluxDB 1.x the subscriber writes
// the messages to.
func TestUplink_TextsOverMQTT(t *testing.T) {
	for _, payload := range []string{"json", "senml", "influx"} {
		t.Run(payload, func(t *testing.T) {
			var db *influxDB
			if payload == "influx" { // the messages are written to it as they come
				db = newInfluxDB(t)
				db.start(t)
			}
			m := startMosquitto(t)
			var mu sync.Mutex
			var bodies [][]byte
			opts := testkit.PublisherOptions("tcp://"+m.addr(), "reader", startTimeout).
				SetOnConnectHandler(func(cl paho.Client) { cl.Subscribe("cairn/#", 1, nil) }).
				SetDefaultPublishHandler(func(_ paho.Client, msg paho.Message) {
					mu.Lock()
					bodies = append(bodies, append([]byte(nil), msg.Payload()...))
					mu.Unlock()
				})
			cl, err := testkit.Connect(opts, startTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Disconnect(100)
			rs := sendTexts(t, fmt.Sprintf(`uplink:
  kind: mqtt
  url: mqtt://%s
  gateway_id: gw-test
  payload: %s
  interval: 100ms
`, m.addr(), payload))
			want := textsOf(rs)
			var got map[textKey]string
			waitUntil(t, 30*time.Second, "the subscriber to get every text", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				if payload == "influx" {
					for _, b := range bodies {
						resp, err := http.Post(db.writeURL(), "text/plain", bytes.NewReader(b))
						if err != nil {
							t.Fatal(err)
						}
						resp.Body.Close()
						if resp.StatusCode != http.StatusNoContent {
							t.Fatalf("InfluxDB answers %s to %s", resp.Status, b)
						}
					}
					bodies = nil
					got, _ = influxTexts(t, db)
					return len(got) >= len(want), fmt.Sprintf("%d of %d texts", len(got), len(want))
				}
				got = map[textKey]string{}
				for _, b := range bodies {
					texts, err := mqttTexts(payload, b)
					if err != nil {
						t.Fatalf("%v: %s", err, b)
					}
					for k, v := range texts {
						got[k] = v
					}
				}
				return len(got) >= len(want), fmt.Sprintf("%d of %d texts", len(got), len(want))
			})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("texts over MQTT:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// mqttTexts reads the text readings of a message of cairn's MQTT
// upstream.
func mqttTexts(payload string, body []byte) (map[textKey]string, error) {
	out := map[textKey]string{}
	switch payload {
	case "json":
		var m struct {
			Device   string
			Readings []struct {
				Metric, Time string
				Text         *string
				Value        *float64
			}
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		for _, r := range m.Readings {
			ts, err := time.Parse(time.RFC3339Nano, r.Time)
			if err != nil {
				return nil, err
			}
			if (r.Text == nil) == (r.Value == nil) {
				return nil, fmt.Errorf("reading %+v: not one of text and value", r)
			}
			if r.Text != nil {
				out[textKey{m.Device, r.Metric, ts.UnixNano()}] = *r.Text
			}
		}
	case "senml":
		var pack []struct {
			BN *string  `json:"bn"`
			BT *float64 `json:"bt"`
			N  string   `json:"n"`
			T  float64  `json:"t"`
			V  *float64 `json:"v"`
			VS *string  `json:"vs"`
		}
		if err := json.Unmarshal(body, &pack); err != nil {
			return nil, err
		}
		var device string
		var bt int64
		for _, r := range pack {
			if r.BN != nil {
				parts := strings.Split(strings.TrimSuffix(*r.BN, ":"), ":")
				device = parts[len(parts)-1]
			}
			if r.BT != nil {
				bt = int64(*r.BT)
			}
			if (r.VS == nil) == (r.V == nil) {
				return nil, fmt.Errorf("record %+v: not one of v and vs", r)
			}
			if r.VS != nil {
				// t is exact to the nanosecond as decimals; here the
				// texts are at whole milliseconds.
				ts := bt*1e9 + int64(r.T*1e3+0.5)*1e6
				out[textKey{device, r.N, ts}] = *r.VS
			}
		}
	}
	return out, nil
}

// instantQuery asks Prometheus' query API for q (query and time) and
// returns the labels of each series of the instant vector it answers
// with.
func (s *prometheusServer) instantQuery(t *testing.T, q url.Values) []map[string]string {
	t.Helper()
	resp, err := http.Get(s.base() + "/api/v1/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %s: %s", resp.Status, body)
	}
	var doc struct {
		Data struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Data.ResultType != "vector" {
		t.Fatalf("query: %v: %s", err, body)
	}
	var out []map[string]string
	for _, r := range doc.Data.Result {
		out = append(out, r.Metric)
	}
	return out
}
