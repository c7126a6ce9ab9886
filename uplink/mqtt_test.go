package uplink

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
)

// TestMQTTMessages_SplitByTopicAndSize: a batch's readings go one topic
// each (the template filled in), in messages no bigger than
// MaxMessageBytes that hold every finite reading once, under its id.
func TestMQTTMessages_SplitByTopicAndSize(t *testing.T) {
	for _, tc := range []struct {
		topic    string
		maxBytes int
		topics   int
	}{
		{"cairn/{gateway}/{device}", 128 << 10, 3},
		{"cairn/{gateway}/{device}", 1 << 10, 3},
		{"dt/{gateway}/{device}/{metric}", 1 << 10, 6},
	} {
		opts := Options{Name: "cloud", URL: "mqtt://127.0.0.1:1883", Gateway: "gw", MQTT: MQTTOptions{Topic: tc.topic, MaxMessageBytes: tc.maxBytes}}
		opts, err := withDefaults(opts)
		if err != nil {
			t.Fatal(err)
		}
		u := &Uplink{opts: opts, log: opts.Logger}
		var rs []buffer.OutboxReading
		for i := range 300 {
			r := buffer.OutboxReading{Seq: uint64(1000 + i)}
			r.Device, r.Metric, r.Unit, r.TS, r.Value = fmt.Sprintf("dev-%d", i%3), []string{"t", "h"}[i/3%2], "°C", int64(i)*1e9, float64(i)/10
			if i == 7 {
				r.Value = math.NaN()
			}
			rs = append(rs, r)
		}
		msgs, skipped := u.mqttMessages("gw-1000", rs)
		if skipped != 1 {
			t.Errorf("%s: %d skipped, want the one NaN", tc.topic, skipped)
		}
		seen := make(map[string]bool)
		topics := make(map[string]bool)
		for _, m := range msgs {
			topics[m.topic] = true
			if len(m.payload) > tc.maxBytes {
				t.Errorf("%s: a message of %d bytes, over %d", tc.topic, len(m.payload), tc.maxBytes)
			}
			var doc struct {
				Gateway, Device, Batch string
				Readings               []struct {
					ID, Metric, Unit, Time string
					Value                  float64
				}
			}
			if err := json.Unmarshal(m.payload, &doc); err != nil {
				t.Fatalf("%s: %v: %s", m.topic, err, m.payload)
			}
			if want := "cairn/gw/" + doc.Device; tc.topic == DefaultTopic && m.topic != want {
				t.Errorf("topic %s, want %s", m.topic, want)
			}
			for _, r := range doc.Readings {
				if seen[r.ID] {
					t.Errorf("%s: id %s twice", tc.topic, r.ID)
				}
				seen[r.ID] = true
			}
		}
		if len(seen) != 299 || len(topics) != tc.topics {
			t.Errorf("%s, %d bytes: %d readings on %d topics, want 299 on %d", tc.topic, tc.maxBytes, len(seen), len(topics), tc.topics)
		}
		if !seen[MQTTReadingID("gw", 1299)] {
			t.Errorf("no reading with id %s", MQTTReadingID("gw", 1299))
		}
	}
}

// TestMQTTMessages_Payloads: with payload senml or influx, each topic's
// readings go in that format's messages, within MaxMessageBytes, every
// finite reading once.
func TestMQTTMessages_Payloads(t *testing.T) {
	for _, f := range []MessageFormat{MessageSenML, MessageInflux} {
		opts, err := withDefaults(Options{Name: "cloud", URL: "mqtt://127.0.0.1:1883", Gateway: "gw",
			MQTT: MQTTOptions{MaxMessageBytes: 1 << 10, Payload: f}})
		if err != nil {
			t.Fatal(err)
		}
		u := &Uplink{opts: opts, log: opts.Logger}
		var rs []buffer.OutboxReading
		for i := range 300 {
			r := buffer.OutboxReading{Seq: uint64(i)}
			r.Device, r.Metric, r.TS, r.Value = fmt.Sprintf("dev-%d", i%3), "t", int64(1_800_000_000+i)*1e9, float64(i)
			if i == 7 {
				r.Value = math.NaN()
			}
			rs = append(rs, r)
		}
		msgs, skipped := u.mqttMessages("gw-0", rs)
		readings := 0
		topics := make(map[string]bool)
		for _, m := range msgs {
			topics[m.topic] = true
			if len(m.payload) > 1<<10 {
				t.Errorf("%s: a message of %d bytes", f, len(m.payload))
			}
			switch f {
			case MessageSenML:
				var pack []map[string]any
				if err := json.Unmarshal(m.payload, &pack); err != nil {
					t.Fatalf("%s: %v: %s", f, err, m.payload)
				}
				readings += len(pack)
			case MessageInflux:
				for _, c := range m.payload {
					if c == '\n' {
						readings++
					}
				}
			}
		}
		if skipped != 1 || readings != 299 || len(topics) != 3 {
			t.Errorf("%s: %d readings on %d topics, %d skipped; want 299 on 3, the NaN skipped", f, readings, len(topics), skipped)
		}
	}
}

// TestMQTTTopic_NamesCannotMakeWildcards: a device or metric named with
// + or #, or a device whose name starts the topic with $, gives a topic a
// client may publish to, not one the broker refuses for ever.
func TestMQTTTopic_NamesCannotMakeWildcards(t *testing.T) {
	for _, tc := range []struct {
		template, device, metric, want string
	}{
		{"cairn/{gateway}/{device}", "kitchen", "t", "cairn/gw/kitchen"},
		{"cairn/{gateway}/{device}/{metric}", "bridge#7", "co2+voc", "cairn/gw/bridge_7/co2_voc"},
		{"{device}/{metric}", "$SYS", "t", "_SYS/t"},
		{"cairn/{device}", "a/b", "t", "cairn/a/b"}, // a / is a level, as the device's own topic has it
	} {
		opts, err := withDefaults(Options{Name: "cloud", URL: "mqtt://127.0.0.1:1883", Gateway: "gw", MQTT: MQTTOptions{Topic: tc.template}})
		if err != nil {
			t.Fatal(err)
		}
		u := &Uplink{opts: opts, log: opts.Logger}
		r := buffer.OutboxReading{}
		r.Device, r.Metric = tc.device, tc.metric
		if got := u.topic(&r); got != tc.want {
			t.Errorf("%s with device %q, metric %q: %q, want %q", tc.template, tc.device, tc.metric, got, tc.want)
		}
	}
}

// TestMQTTFormatName: the status and the log name an MQTT upstream's
// payload, not the JSON bodies of the HTTP kinds it is set to.
func TestMQTTFormatName(t *testing.T) {
	for _, tc := range []struct {
		url     string
		payload MessageFormat
		want    string
	}{
		{"mqtt://127.0.0.1:1883", 0, "json"},
		{"mqtts://127.0.0.1:8883", MessageSenML, "senml"},
		{"wss://127.0.0.1:8884/mqtt", MessageInflux, "influx"},
		{"http://127.0.0.1:8428/write", MessageSenML, "influx"},
	} {
		opts := Options{URL: tc.url, Format: JSON, MQTT: MQTTOptions{Payload: tc.payload}}
		if strings.HasPrefix(tc.url, "http") {
			opts.Format = Influx
		}
		if got := opts.formatName(); got != tc.want {
			t.Errorf("%s, payload %d: %q, want %q", tc.url, tc.payload, got, tc.want)
		}
	}
}
