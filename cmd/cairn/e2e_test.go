package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	"github.com/cairn-gateway/cairn/third_party/paho/packets"

	"github.com/cairn-gateway/cairn/buffer"
)

// embeddedConfig runs the embedded broker and the API on free ports. The
// second topic takes one plain value per message, named by the topic.
const embeddedConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - pattern: "sensors/{device}/telemetry"
      format: auto
    - pattern: "sensors/{device}/{metric}"
      format: auto
http:
  listen: "127.0.0.1:0"
store:
`

// t0 is 2023-11-14T22:13:20Z in Unix milliseconds.
const t0 = 1_700_000_000_000

// recvTime stands for "the time the broker received the message" in an
// expected reading: the payload carried no time.
const recvTime = -1

// ms returns Unix milliseconds in nanoseconds.
func ms(v int64) int64 { return v * 1e6 }

// wantReading builds an expected reading; ts is in Unix milliseconds, or
// recvTime.
func wantReading(device, metric string, ts int64, value float64) buffer.Reading {
	if ts != recvTime {
		ts = ms(ts)
	}
	return buffer.Reading{Device: device, Metric: metric, TS: ts, Value: value}
}

// apiReadings returns the readings of device among rs as the readings
// endpoint lists them: by time, newest first if desc, ties by metric then
// value bits (as the store orders them).
func apiReadings(rs []buffer.Reading, device string, desc bool) []readingDoc {
	var sel []buffer.Reading
	for _, r := range rs {
		if r.Device == device {
			sel = append(sel, r)
		}
	}
	sort.Slice(sel, func(i, j int) bool {
		a, b := sel[i], sel[j]
		if a.TS != b.TS {
			return (a.TS < b.TS) != desc
		}
		if a.Metric != b.Metric {
			return a.Metric < b.Metric
		}
		return math.Float64bits(a.Value) < math.Float64bits(b.Value)
	})
	out := make([]readingDoc, len(sel))
	for i, r := range sel {
		out[i] = readingDoc{Metric: r.Metric, TS: r.Time().Format(time.RFC3339Nano), Value: r.Value}
	}
	return out
}

// checkReadings fetches path and compares the readings it lists.
func checkReadings(t *testing.T, api *apiClient, device, query string, want []readingDoc) {
	t.Helper()
	path := "/v1/devices/" + url.PathEscape(device) + "/readings"
	if query != "" {
		path += "?" + query
	}
	var got readingsDoc
	if code := api.get(t, path, &got); code != http.StatusOK {
		t.Fatalf("GET %s: got status %d, want 200", path, code)
	}
	if got.Device != device {
		t.Errorf("GET %s: got device %q, want %q", path, got.Device, device)
	}
	if !slices.Equal(got.Readings, want) {
		t.Errorf("GET %s:\ngot  %v\nwant %v", path, got.Readings, want)
	}
}

func TestRun_EmbeddedEndToEnd(t *testing.T) {
	messages := []struct {
		topic, payload string
		want           []buffer.Reading // readings the message gives
		reason         string           // why a malformed message is rejected
	}{
		{
			topic:   "sensors/greenhouse-1/telemetry",
			payload: `{"ts":1700000000000,"temperature":21.5,"humidity":40}`,
			want: []buffer.Reading{
				wantReading("greenhouse-1", "temperature", t0, 21.5),
				wantReading("greenhouse-1", "humidity", t0, 40),
			},
		},
		{
			topic:   "sensors/greenhouse-1/telemetry",
			payload: `{"ts":1700000001000,"temperature":21.75,"soil":{"moisture":0.31,"probe":{"depth_cm":15}},"notes":["ok"],"tags":[1,2]}`,
			want: []buffer.Reading{
				wantReading("greenhouse-1", "temperature", t0+1000, 21.75),
				wantReading("greenhouse-1", "soil.moisture", t0+1000, 0.31),
				wantReading("greenhouse-1", "soil.probe.depth_cm", t0+1000, 15),
			},
		},
		{
			topic:   "sensors/greenhouse-1/telemetry",
			payload: `{"ts":1700000002000,"temperature":`,
			reason:  "invalid_json",
		},
		{
			topic:   "sensors/greenhouse-1/telemetry",
			payload: `{"ts":"2023-11-14T22:13:22.5Z","temperature":22,"door_open":true}`,
			want: []buffer.Reading{
				wantReading("greenhouse-1", "temperature", t0+2500, 22),
				wantReading("greenhouse-1", "door_open", t0+2500, 1),
			},
		},
		{
			topic:   "sensors/greenhouse-2/telemetry",
			payload: `{"ts":"2023-11-14T23:13:23+01:00","temperature":-3.25,"door_open":false}`,
			want: []buffer.Reading{
				wantReading("greenhouse-2", "temperature", t0+3000, -3.25),
				wantReading("greenhouse-2", "door_open", t0+3000, 0),
			},
		},
		{
			topic:   "sensors/greenhouse-2/telemetry",
			payload: `{"ts":"yesterday","temperature":1}`,
			reason:  "bad_timestamp",
		},
		{
			topic:   "sensors/greenhouse-2/telemetry",
			payload: `{"ts":1700000004000,"temperature":-3.5}`,
			want:    []buffer.Reading{wantReading("greenhouse-2", "temperature", t0+4000, -3.5)},
		},
		{
			topic:   "sensors/greenhouse-2/telemetry",
			payload: `{"notes":["no numbers here"]}`,
			reason:  "no_readings",
		},
		{
			topic:   "sensors/weather/telemetry",
			payload: `{"ts":1700000005000,"wind":{"speed":3.5,"gust":7.25},"rain_mm":0}`,
			want: []buffer.Reading{
				wantReading("weather", "wind.speed", t0+5000, 3.5),
				wantReading("weather", "wind.gust", t0+5000, 7.25),
				wantReading("weather", "rain_mm", t0+5000, 0),
			},
		},
		{
			topic:   "sensors/weather/pressure",
			payload: `a text longer than a reading's text may be, which is sixty-four bytes`,
			reason:  "text_too_long",
		},
		{
			topic:   "sensors/weather/pressure",
			payload: `1013.25`,
			want:    []buffer.Reading{wantReading("weather", "pressure", recvTime, 1013.25)},
		},
		{
			topic:   "sensors/weather/humidity",
			payload: `{"value":81.5,"unit":"%","ts":1700000006000}`,
			want:    []buffer.Reading{wantReading("weather", "humidity", t0+6000, 81.5)},
		},
		{
			topic:   "sensors/bad\u200bdevice/telemetry", // a zero-width space: not printable
			payload: `{"ts":1700000006000,"temperature":1}`,
			reason:  "bad_device",
		},
		{
			topic:   "sensors/weather/telemetry",
			payload: `{"ts":1700000007000,"temperature":1.25e1}`,
			want:    []buffer.Reading{wantReading("weather", "temperature", t0+7000, 12.5)},
		},
		{
			topic:   "sensors/weather/telemetry",
			payload: `{"ts":1700000007500,"temperature":}`,
			reason:  "invalid_json",
		},
		{
			topic:   "sensors/greenhouse-1/telemetry",
			payload: `{"ts":1700000008000,"temperature":23}`,
			want:    []buffer.Reading{wantReading("greenhouse-1", "temperature", t0+8000, 23)},
		},
	}
	var want []buffer.Reading
	var wantRejected uint64
	wantReasons := make(map[string]uint64)
	for _, m := range messages {
		want = append(want, m.want...)
		if m.reason != "" {
			wantReasons[m.reason]++
			wantRejected++
		}
	}
	devices := []string{"greenhouse-1", "greenhouse-2", "weather"}

	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, embeddedConfig)
	d := startDaemon(t, cfg)
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "e2e-publisher")

	// Publish everything back to back, then collect the PUBACKs: a bad
	// message in the middle must not hold up or drop the ones after it.
	sent := time.Now()
	var errs []error
	toks := make([]func() error, len(messages))
	for i, m := range messages {
		tok := pub.Publish(m.topic, 1, false, m.payload)
		toks[i] = func() error {
			if !tok.WaitTimeout(ackTimeout) {
				return fmt.Errorf("message %d (%s): no PUBACK in %s", i, m.payload, ackTimeout)
			}
			return tok.Error()
		}
	}
	for _, wait := range toks {
		if err := wait(); err != nil {
			errs = append(errs, err)
		}
	}
	acked := time.Now()
	if len(errs) > 0 {
		t.Fatalf("publish: %v\nlog:\n%s", errs, d.log)
	}
	if !pub.IsConnectionOpen() {
		t.Fatal("publisher was disconnected: a bad message must not end the connection")
	}

	// A PUBACK means stored: no waiting from here on. The plain value
	// carried no time, so it has the time it was received.
	var pressure readingsDoc
	api.get(t, "/v1/devices/weather/readings?metric=pressure", &pressure)
	if len(pressure.Readings) != 1 {
		t.Fatalf("weather pressure: got %v, want one reading", pressure.Readings)
	}
	recvTS, err := time.Parse(time.RFC3339Nano, pressure.Readings[0].TS)
	if err != nil {
		t.Fatal(err)
	}
	if recvTS.Before(sent) || recvTS.After(acked) {
		t.Errorf("weather pressure: got time %s, want the receive time, between %s and %s", recvTS, sent, acked)
	}
	for i := range want {
		if want[i].TS == recvTime {
			want[i].TS = recvTS.UnixNano()
		}
	}

	t.Run("readings", func(t *testing.T) {
		for _, dev := range devices {
			checkReadings(t, api, dev, "order=asc", apiReadings(want, dev, false))
			checkReadings(t, api, dev, "order=desc", apiReadings(want, dev, true))
			checkReadings(t, api, dev, "", apiReadings(want, dev, true)) // newest first by default
		}
	})

	t.Run("query parameters", func(t *testing.T) {
		doc := func(metric string, ts int64, v float64) readingDoc {
			return readingDoc{Metric: metric, TS: msTS(ts), Value: v}
		}
		tests := []struct {
			query string
			want  []readingDoc
		}{
			{"metric=temperature&order=asc", []readingDoc{
				doc("temperature", t0, 21.5), doc("temperature", t0+1000, 21.75),
				doc("temperature", t0+2500, 22), doc("temperature", t0+8000, 23),
			}},
			{"metric=temperature&from=1700000001000&to=1700000008000&order=asc", []readingDoc{
				doc("temperature", t0+1000, 21.75), doc("temperature", t0+2500, 22),
			}},
			{"from=2023-11-14T22:13:21Z&to=2023-11-14T22:13:22.5Z&order=asc", []readingDoc{
				doc("soil.moisture", t0+1000, 0.31), doc("soil.probe.depth_cm", t0+1000, 15), doc("temperature", t0+1000, 21.75),
			}},
			{"from=" + url.QueryEscape("2023-11-14T23:13:22.5+01:00"), []readingDoc{
				doc("temperature", t0+8000, 23), doc("door_open", t0+2500, 1), doc("temperature", t0+2500, 22),
			}},
			{"limit=2", []readingDoc{doc("temperature", t0+8000, 23), doc("door_open", t0+2500, 1)}},
			{"limit=1&order=asc", []readingDoc{doc("humidity", t0, 40)}},
			{"metric=humidity&to=1700000000000", []readingDoc{}},
			{"metric=no_such_metric", []readingDoc{}},
			// Unix seconds, told from milliseconds by their magnitude.
			{"metric=temperature&from=1700000001&to=1700000008&order=asc", []readingDoc{
				doc("temperature", t0+1000, 21.75), doc("temperature", t0+2500, 22),
			}},
			// A to past what the store can hold is no upper bound.
			{"metric=temperature&to=9999-12-31T23:59:59Z&order=asc", []readingDoc{
				doc("temperature", t0, 21.5), doc("temperature", t0+1000, 21.75),
				doc("temperature", t0+2500, 22), doc("temperature", t0+8000, 23),
			}},
		}
		for _, tt := range tests {
			checkReadings(t, api, "greenhouse-1", tt.query, tt.want)
		}
	})

	t.Run("bad query parameters", func(t *testing.T) {
		tests := []struct {
			path     string
			wantCode int
			wantText string // in the error message
		}{
			{"/v1/devices/greenhouse-1/readings?limit=0", 400, "limit"},
			{"/v1/devices/greenhouse-1/readings?limit=ten", 400, "limit"},
			{"/v1/devices/greenhouse-1/readings?limit=10001", 400, "limit"},
			{"/v1/devices/greenhouse-1/readings?order=sideways", 400, "order"},
			{"/v1/devices/greenhouse-1/readings?from=yesterday", 400, "from"},
			{"/v1/devices/greenhouse-1/readings?to=2023-13-01T00:00:00Z", 400, "to"},
			{"/v1/devices/greenhouse-1/readings?from=1700000002000&to=1700000001000", 400, "after"},
			{"/v1/devices/nobody/readings", 404, "nobody"},
			{"/v1/devices/nobody/stats?metric=t&from=0", 404, "nobody"},
			{"/v1/devices/greenhouse-1/readings?from=2263-01-01T00:00:00Z", 400, "1677-09-21T00:12:43Z to 2262-04-11T23:47:16Z"},
			{"/v1/devices/greenhouse-1/readings?from=0001-01-01T00:00:00Z", 400, "outside the times the store can hold"},
			{"/v1/devices/greenhouse-1/stats?metric=temperature&from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z", 400, "from"},
			{"/v1/devices?limit=0", 400, "limit"},
			{"/v1/devices?limit=1001", 400, "limit"},
			{"/v1/devices?after=a%01b", 400, "after"},
			{"/v1/no-such-endpoint", 404, "no such endpoint"},
		}
		for _, tt := range tests {
			var got struct {
				Error string `json:"error"`
			}
			code := api.get(t, tt.path, &got)
			if code != tt.wantCode || !strings.Contains(got.Error, tt.wantText) {
				t.Errorf("GET %s: got %d %q, want %d and an error that mentions %q", tt.path, code, got.Error, tt.wantCode, tt.wantText)
			}
		}
	})

	t.Run("router errors are JSON", func(t *testing.T) {
		resp, err := http.Post("http://"+d.http+"/v1/status", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Error string `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusMethodNotAllowed ||
			resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(got.Error, "POST") || resp.Header.Get("Allow") == "" {
			t.Errorf("POST /v1/status: %d %s %q (%v), want 405 as JSON with Allow", resp.StatusCode, resp.Header.Get("Content-Type"), got.Error, err)
		}
	})

	wantDevices := devicesDoc(want)
	t.Run("devices", func(t *testing.T) {
		checkDevices(t, api, wantDevices)
	})

	t.Run("status", func(t *testing.T) {
		st := api.status(t)
		tests := []struct {
			name      string
			got, want uint64
		}{
			{"ingest.messages", st.Ingest.Messages, uint64(len(messages))},
			{"ingest.readings", st.Ingest.Readings, uint64(len(want))},
			{"ingest.stored", st.Ingest.Stored, uint64(len(want))},
			{"ingest.duplicates", st.Ingest.Duplicates, 0},
			{"ingest.failed", st.Ingest.Failed, 0},
			{"ingest.rejected", st.Ingest.Rejected, wantRejected},
			{"store.readings", st.Store.Readings, uint64(len(want))},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
			}
		}
		if !maps.Equal(st.Ingest.ByReason, wantReasons) {
			t.Errorf("ingest.rejected_by_reason: got %v, want %v", st.Ingest.ByReason, wantReasons)
		}
	})

	// Stop cleanly and start again on the same data: everything is there.
	pub.Disconnect(250)
	if err := d.stop(); err != nil {
		t.Fatalf("cairn run after cancel: got %v, want nil", err)
	}
	d2 := startDaemon(t, cfg)
	api2 := newAPIClient(d2.http)
	t.Run("after restart", func(t *testing.T) {
		for _, dev := range devices {
			checkReadings(t, api2, dev, "order=asc&limit=10000", apiReadings(want, dev, false))
		}
		checkDevices(t, api2, wantDevices)
		if got := api2.status(t).Store.Readings; got != uint64(len(want)) {
			t.Errorf("store.readings: got %d, want %d", got, len(want))
		}
	})
}

// deviceDoc is one device as /v1/devices lists it.
type deviceDoc struct {
	Device  string   `json:"device"`
	Metrics []string `json:"metrics"`
	// NewestReading is the newest reading's own time; last_seen, when
	// cairn heard the device, TestRun_LastSeenIsWhenHeard checks.
	NewestReading string `json:"newest_reading"`
}

// devicesDoc returns what /v1/devices should list for the readings rs.
func devicesDoc(rs []buffer.Reading) []deviceDoc {
	metrics := make(map[string]map[string]bool)
	last := make(map[string]int64)
	for _, r := range rs {
		if metrics[r.Device] == nil {
			metrics[r.Device] = make(map[string]bool)
			last[r.Device] = r.TS
		}
		metrics[r.Device][r.Metric] = true
		last[r.Device] = max(last[r.Device], r.TS)
	}
	var out []deviceDoc
	for dev, ms := range metrics {
		d := deviceDoc{Device: dev, NewestReading: time.Unix(0, last[dev]).UTC().Format(time.RFC3339Nano)}
		for m := range ms {
			d.Metrics = append(d.Metrics, m)
		}
		sort.Strings(d.Metrics)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

func checkDevices(t *testing.T, api *apiClient, want []deviceDoc) {
	t.Helper()
	var got struct {
		Devices []deviceDoc `json:"devices"`
	}
	if code := api.get(t, "/v1/devices", &got); code != http.StatusOK {
		t.Fatalf("GET /v1/devices: got %d, want 200", code)
	}
	if !reflect.DeepEqual(got.Devices, want) {
		t.Errorf("GET /v1/devices:\ngot  %v\nwant %v", got.Devices, want)
	}
}

func TestRun_Redelivery(t *testing.T) {
	const (
		first  = `{"ts":1700000000000,"temperature":20.5,"humidity":55}`
		second = `{"ts":1700000001000,"temperature":20.25,"humidity":56}`
	)
	steps := []struct {
		name           string
		topic, payload string
		times          int  // published this often back to back, then the PUBACKs are awaited
		dup            bool // sent once, with the DUP flag, on a raw MQTT connection
		wantStored     uint64
		wantDuplicates uint64
	}{
		{"new message", "sensors/redelivery-1/telemetry", first, 1, false, 2, 0},
		{"same message again", "sensors/redelivery-1/telemetry", first, 1, false, 0, 2},
		{"same message with the DUP flag", "sensors/redelivery-1/telemetry", first, 0, true, 0, 2},
		{"new message five times at once", "sensors/redelivery-1/telemetry", second, 5, false, 2, 8},
		{"same time, one value differs", "sensors/redelivery-1/telemetry", `{"ts":1700000000000,"temperature":20.75,"humidity":55}`, 1, false, 1, 1},
		{"same time in RFC 3339", "sensors/redelivery-1/telemetry", `{"ts":"2023-11-14T22:13:20Z","temperature":20.5}`, 1, false, 0, 1},
		{"same readings of another device", "sensors/redelivery-2/telemetry", first, 1, false, 2, 0},
	}
	dataDir := t.TempDir()
	d := startDaemon(t, writeConfig(t, dataDir, embeddedConfig))
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "redelivery-publisher")

	for _, st := range steps {
		before := api.status(t)
		var errs []error
		var toks []func() error
		for range st.times {
			tok := pub.Publish(st.topic, 1, false, st.payload)
			toks = append(toks, func() error {
				if !tok.WaitTimeout(ackTimeout) {
					return fmt.Errorf("no PUBACK in %s", ackTimeout)
				}
				return tok.Error()
			})
		}
		for _, wait := range toks {
			if err := wait(); err != nil {
				errs = append(errs, err)
			}
		}
		if st.dup {
			if err := publishDup(d.mqtt, st.topic, st.payload); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			t.Fatalf("%s: %v", st.name, errs)
		}
		after := api.status(t)
		checks := []struct {
			what      string
			got, want uint64
		}{
			{"ingest.stored", after.Ingest.Stored - before.Ingest.Stored, st.wantStored},
			{"ingest.duplicates", after.Ingest.Duplicates - before.Ingest.Duplicates, st.wantDuplicates},
			{"store.readings", after.Store.Readings - before.Store.Readings, st.wantStored},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: %s grew by %d, want %d", st.name, c.what, c.got, c.want)
			}
		}
	}

	doc := func(metric string, ts int64, v float64) readingDoc {
		return readingDoc{Metric: metric, TS: msTS(ts), Value: v}
	}
	checkReadings(t, api, "redelivery-1", "order=asc", []readingDoc{
		doc("humidity", t0, 55), doc("temperature", t0, 20.5), doc("temperature", t0, 20.75),
		doc("humidity", t0+1000, 56), doc("temperature", t0+1000, 20.25),
	})
	checkReadings(t, api, "redelivery-2", "order=asc", []readingDoc{
		doc("humidity", t0, 55), doc("temperature", t0, 20.5),
	})
}

// publishDup sends one QoS 1 PUBLISH with the DUP flag set, as a sensor
// does when it resends a message whose PUBACK it did not get, on its own
// MQTT 3.1.1 connection, and waits for the PUBACK. paho's client sets DUP
// only itself, so the packets are built with its codec.
func publishDup(addr, topic, payload string) error {
	conn, err := dialMQTT(addr, "dup-sender")
	if err != nil {
		return err
	}
	defer conn.Close()
	const id = 4711
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.Qos, p.Dup = 1, true
	p.TopicName, p.MessageID, p.Payload = topic, id, []byte(payload)
	if err := p.Write(conn); err != nil {
		return fmt.Errorf("write PUBLISH: %w", err)
	}
	pk, err := packets.ReadPacket(conn)
	if err != nil {
		return fmt.Errorf("read PUBACK: %w", err)
	}
	if pa, ok := pk.(*packets.PubackPacket); !ok || pa.MessageID != id {
		return fmt.Errorf("got %v, want PUBACK of message %d", pk, id)
	}
	if err := packets.NewControlPacket(packets.Disconnect).Write(conn); err != nil {
		return fmt.Errorf("write DISCONNECT: %w", err)
	}
	return nil
}

// dialMQTT opens an MQTT 3.1.1 connection to addr as client id, with a
// deadline of ackTimeout, for tests that need packets paho would not send
// or would hide; the packets are built with paho's codec.
func dialMQTT(addr, id string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, startTimeout)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(ackTimeout)); err != nil {
		conn.Close()
		return nil, err
	}
	c := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	c.ProtocolName, c.ProtocolVersion = "MQTT", 4
	c.CleanSession, c.ClientIdentifier, c.Keepalive = true, id, 30
	if err := c.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("write CONNECT: %w", err)
	}
	pk, err := packets.ReadPacket(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read CONNACK: %w", err)
	}
	if ca, ok := pk.(*packets.ConnackPacket); !ok || ca.ReturnCode != packets.Accepted {
		conn.Close()
		return nil, fmt.Errorf("got %v, want an accepting CONNACK", pk)
	}
	return conn, nil
}

// TestRun_OnePubackAfterStoring publishes a QoS 1 message on a raw MQTT
// connection: it gets exactly one PUBACK, the hook's, once the reading is
// stored. The broker itself must send none: the hook hands it the held
// message as one to ignore.
func TestRun_OnePubackAfterStoring(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	conn, err := dialMQTT(d.mqtt, "one-puback")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const id = 7
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.Qos, p.TopicName, p.MessageID = 1, "sensors/pantry/telemetry", id
	p.Payload = []byte(`{"ts":1700000000000,"temperature":4.5}`)
	if err := p.Write(conn); err != nil {
		t.Fatal(err)
	}
	pk, err := packets.ReadPacket(conn)
	if err != nil {
		t.Fatalf("read PUBACK: %v", err)
	}
	if pa, ok := pk.(*packets.PubackPacket); !ok || pa.MessageID != id {
		t.Fatalf("got %v, want PUBACK of message %d", pk, id)
	}
	if got := newAPIClient(d.http).status(t).Store.Readings; got != 1 {
		t.Errorf("store.readings at the PUBACK: got %d, want 1", got)
	}
	// Nothing more comes: a second PUBACK would be the broker's own.
	conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if pk, err := packets.ReadPacket(conn); err == nil {
		t.Errorf("after the PUBACK the client got %v as well", pk)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("after the PUBACK: %v, want a read timeout", err)
	}
}

// TestRun_ManyInFlight publishes more QoS 1 messages back to back than the
// broker's default receive maximum (1,024): held PUBACKs must slow the
// sender down, never cost it its connection.
func TestRun_ManyInFlight(t *testing.T) {
	const n = 3000
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	pub := mustConnect(t, d.mqtt, "many-in-flight")
	toks := make([]paho.Token, n)
	for i := range toks {
		toks[i] = pub.Publish("sensors/burst/telemetry", 1, false, fmt.Sprintf(`{"ts":%d,"v":%d}`, 1700000000000+i, i))
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(ackTimeout) {
			t.Fatalf("message %d: no PUBACK in %s", i, ackTimeout)
		}
		if err := tok.Error(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if !pub.IsConnectionOpen() {
		t.Fatal("publisher was disconnected")
	}
	if got := newAPIClient(d.http).status(t).Store.Readings; got != n {
		t.Errorf("store.readings: got %d, want %d", got, n)
	}
}

type statsDoc struct {
	Device string `json:"device"`
	Metric string `json:"metric"`
	Group  string `json:"group"`
	Stats  []struct {
		Start  string  `json:"start"`
		Count  uint64  `json:"count"`
		Sum    float64 `json:"sum"`
		Min    float64 `json:"min"`
		Max    float64 `json:"max"`
		SumSqr float64 `json:"sumsqr"`
		Mean   float64 `json:"mean"`
		StdDev float64 `json:"stddev"`
	} `json:"stats"`
}

func TestRun_StatsEndpoint(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	pub := mustConnect(t, d.mqtt, "stats-publisher")
	const h0 = 1_699_999_200_000 // 2023-11-14T22:00:00Z
	// Minute 0: 2 and 4; minute 1: 6; an hour later: 8. Then a redelivery.
	for _, m := range []struct {
		ms int64
		v  float64
	}{{0, 2}, {10_000, 4}, {70_000, 6}, {3_601_000, 8}, {10_000, 4}} {
		if err := publish1(pub, "sensors/stats-1/telemetry", fmt.Sprintf(`{"ts":%d,"t":%g}`, h0+m.ms, m.v)); err != nil {
			t.Fatal(err)
		}
	}
	api := newAPIClient(d.http)
	from, to := msTS(h0), msTS(h0+2*3_600_000)
	tests := []struct {
		group  string
		starts []string
		counts []uint64
		sums   []float64
	}{
		{"minute", []string{msTS(h0), msTS(h0 + 60_000), msTS(h0 + 3_600_000)}, []uint64{2, 1, 1}, []float64{6, 6, 8}},
		{"hour", []string{msTS(h0), msTS(h0 + 3_600_000)}, []uint64{3, 1}, []float64{12, 8}},
		{"all", []string{from}, []uint64{4}, []float64{20}},
	}
	for _, tt := range tests {
		var doc statsDoc
		path := "/v1/devices/stats-1/stats?metric=t&from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to) + "&group=" + tt.group
		if code := api.get(t, path, &doc); code != http.StatusOK {
			t.Fatalf("%s: status %d", path, code)
		}
		if doc.Device != "stats-1" || doc.Metric != "t" || doc.Group != tt.group || len(doc.Stats) != len(tt.starts) {
			t.Fatalf("group %s: got %+v, want %d groups", tt.group, doc, len(tt.starts))
		}
		for i, g := range doc.Stats {
			if g.Start != tt.starts[i] || g.Count != tt.counts[i] || g.Sum != tt.sums[i] {
				t.Errorf("group %s #%d: got start %s count %d sum %g, want %s %d %g", tt.group, i, g.Start, g.Count, g.Sum, tt.starts[i], tt.counts[i], tt.sums[i])
			}
		}
	}
	// The whole range: mean 5, population standard deviation √5.
	var doc statsDoc
	api.get(t, "/v1/devices/stats-1/stats?metric=t&group=all&from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), &doc)
	if g := doc.Stats[0]; g.Min != 2 || g.Max != 8 || g.SumSqr != 120 || g.Mean != 5 || math.Abs(g.StdDev-math.Sqrt(5)) > 1e-12 {
		t.Errorf("all: got %+v, want min 2, max 8, sumsqr 120, mean 5, stddev √5", g)
	}
	// A range that cuts minutes uses the readings at its ends.
	api.get(t, "/v1/devices/stats-1/stats?metric=t&group=all&from="+strconv.FormatInt(h0+5_000, 10)+"&to="+strconv.FormatInt(h0+3_601_001, 10), &doc)
	if len(doc.Stats) != 1 || doc.Stats[0].Count != 3 || doc.Stats[0].Sum != 18 {
		t.Errorf("partial minutes: got %+v, want count 3, sum 18", doc.Stats)
	}
	for _, bad := range []string{
		"/v1/devices/stats-1/stats?from=0&group=all",              // no metric
		"/v1/devices/stats-1/stats?metric=t&from=-1x&group=all",   // bad time from now
		"/v1/devices/stats-1/stats?metric=t&from=0&group=week",    // bad group
		"/v1/devices/stats-1/stats?metric=t&from=10&to=5",         // reversed
		"/v1/devices/stats-1/stats?metric=t&from=yesterday",       // bad time
		"/v1/devices/stats-1/stats?metric=t&from=0&group=minute",  // too many groups
		"/v1/devices/stats%011/stats?metric=t&from=0&group=all",   // bad device
		"/v1/devices/stats-1/stats?metric=t%0Ax&from=0&group=all", // bad metric
	} {
		code, body, err := api.fetch(bad)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusBadRequest || !strings.Contains(string(body), `"error"`) {
			t.Errorf("GET %s: got %d %s, want 400 with an error", bad, code, body)
		}
	}
}

func TestRun_RejectsAbsurdTimes(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	pub := mustConnect(t, d.mqtt, "times-publisher")
	now := time.Now()
	for _, m := range []struct {
		ts     time.Time
		stored bool
	}{
		{time.Date(1995, 6, 1, 0, 0, 0, 0, time.UTC), true}, // before 2000: a clock never set, restamped
		{now.Add(48 * time.Hour), false},                    // beyond max_future_skew (1h)
		{now.Add(30 * time.Minute), true},                   // a clock a little ahead
		{now.Add(-time.Minute), true},
	} {
		if err := publish1(pub, "sensors/times-1/telemetry", fmt.Sprintf(`{"ts":%d,"t":1}`, m.ts.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	st := newAPIClient(d.http).status(t)
	if got := st.Ingest.ByReason["time_out_of_range"]; got != 1 {
		t.Errorf("rejected time_out_of_range: got %d, want 1 (status %+v)", got, st.Ingest)
	}
	if st.Store.Readings != 3 {
		t.Errorf("store.readings: got %d, want 3", st.Store.Readings)
	}
}

func TestRun_StatusCommand(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	pub := mustConnect(t, d.mqtt, "status-publisher")
	for _, p := range []string{`{"ts":1700000000000,"t":1}`, `{"ts":1700000001000,"t":2}`, `not json`} {
		if err := publish1(pub, "sensors/status-1/telemetry", p); err != nil {
			t.Fatal(err)
		}
	}
	// Messages during the status command's sample make a rate.
	sent := make(chan error, 1)
	go func() {
		for i := range 20 {
			time.Sleep(25 * time.Millisecond)
			if err := publish1(pub, "sensors/status-2/telemetry", fmt.Sprintf(`{"ts":%d,"t":3}`, t0+int64(i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	var out strings.Builder
	if err := run(context.Background(), []string{"status", "-url", "http://" + d.http, "-sample", "2s"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`now (\d+) messages/s, (\d+) readings/s stored`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("status output has no ingest rate above 0:\n%s", out.String())
	}
	for _, want := range []string{"mqtt:   embedded broker", "23 messages, 22 readings stored", "1 rejected (no_metric 1)", "last rejected:", "store:  22 readings in 2 series", "uplink: off"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}
	// Nobody listening: a clear error.
	err := run(context.Background(), []string{"status", "-url", "http://127.0.0.1:1"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is cairn running?") {
		t.Errorf("status with nobody listening: got %v", err)
	}
}

// A subscriber that stops reading (a frozen link) fills its socket, and
// the broker's writes to it block; stopping the gateway must not wait for
// it.
func TestRun_StopsDespiteStuckSubscriber(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	stuck, err := net.Dial("tcp", d.mqtt)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if err := stuck.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	stuck.SetDeadline(time.Now().Add(ackTimeout)) //nolint:errcheck // a failed read below says it
	if _, err := stuck.Write(append(rawConnect("stuck", "", ""), rawSubscribe(1, "other/#")...)); err != nil {
		t.Fatal(err)
	}
	acks := make([]byte, 4+5) // CONNACK, SUBACK
	if _, err := io.ReadFull(stuck, acks); err != nil || acks[3] != 0 || acks[8] > 2 {
		t.Fatalf("CONNACK and SUBACK %x, %v", acks, err)
	}
	// From here on it reads nothing. 32 MiB at QoS 0 fill every buffer on
	// the way to it, and the broker's writer blocks.
	pub := mustConnect(t, d.mqtt, "flood")
	big := strings.Repeat("x", 64<<10)
	for range 512 {
		pub.Publish("other/big", 0, false, big)
	}
	if err := publish1(pub, "sensors/after-flood/telemetry", `{"t":1}`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := d.stop(); err != nil {
		t.Fatalf("cairn run: %v", err)
	}
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))
	// The listener's write timeout freed the broker's writer: it closed
	// every client, and Run did not have to give up on it.
	if strings.Contains(d.log.String(), `msg="stopping without waiting for the mqtt broker"`) {
		t.Errorf("the broker did not close:\n%s", d.log)
	}
}

// TestRun_RoutesStoredMessagesToSubscribers checks that the messages the
// gateway holds until their commit still reach other subscribers, with
// their topic, payload, QoS and retain flag, in the order they were sent.
func TestRun_RoutesStoredMessagesToSubscribers(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	type got struct {
		topic, payload string
		qos            byte
		retained       bool
	}
	subscribe := func(c paho.Client) <-chan got {
		t.Helper()
		ch := make(chan got, 16)
		tok := c.Subscribe("sensors/#", 1, func(_ paho.Client, m paho.Message) {
			ch <- got{m.Topic(), string(m.Payload()), m.Qos(), m.Retained()}
		})
		if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
			t.Fatalf("subscribe: %v", tok.Error())
		}
		return ch
	}
	next := func(ch <-chan got) got {
		t.Helper()
		select {
		case m := <-ch:
			return m
		case <-time.After(ackTimeout):
			t.Fatal("no message routed to the subscriber")
			return got{}
		}
	}
	live := subscribe(mustConnect(t, d.mqtt, "dashboard"))
	pub := mustConnect(t, d.mqtt, "bridge")
	sent := []got{
		{"sensors/kitchen/telemetry", `{"ts":1700000000000,"t":21.5}`, 1, false},
		{"sensors/garage/temperature", "17.25", 1, false},
		{"sensors/kitchen/telemetry", `{"ts":1700000001000,"t":21.75}`, 1, true},
	}
	for _, m := range sent {
		tok := pub.Publish(m.topic, m.qos, m.retained, m.payload)
		if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", m.topic, tok.Error())
		}
	}
	for i, want := range sent {
		want.retained = false // a live subscriber gets no retain flag (MQTT 3.1.1, 3.3.1.3)
		if m := next(live); m != want {
			t.Errorf("message %d routed as %+v, want %+v", i, m, want)
		}
	}
	// A subscriber that comes later gets the retained one.
	if m, want := next(subscribe(mustConnect(t, d.mqtt, "late"))), sent[2]; m != want {
		t.Errorf("retained message: got %+v, want %+v", m, want)
	}
	if got := newAPIClient(d.http).status(t).Store.Readings; got != 3 {
		t.Errorf("store.readings: got %d, want 3", got)
	}
}
