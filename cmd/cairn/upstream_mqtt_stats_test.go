package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// mqttStats is Mosquitto taking the records of data: stats from an MQTT
// upstream, and a subscriber to stats/# with a persistent session that
// reads them in one payload format. A record sent again replaces the
// one before, as a reader keyed by the record's id (or, in line
// protocol, by its tags and time, as InfluxDB is) does.
type mqttStats struct {
	*mosquitto
	payload string

	mu       sync.Mutex // guards the fields below
	messages int
	maxBytes int // of a message's payload
	got      map[statsKey]statsSample
	ids      map[statsKey]map[string]bool // the ids a value came under
	bad      []string                     // what was wrong with messages
}

// newMQTTStats starts Mosquitto and subscribes to stats/#, where cairn's
// upstream publishes records in payload.
func newMQTTStats(t *testing.T, payload string) *mqttStats {
	s := &mqttStats{mosquitto: startMosquitto(t), payload: payload,
		got: make(map[statsKey]statsSample), ids: make(map[statsKey]map[string]bool)}
	opts := testkit.PublisherOptions("tcp://"+s.addr(), "stats-reader", startTimeout).
		SetCleanSession(false).
		SetAutoReconnect(true).
		SetMaxReconnectInterval(200 * time.Millisecond).
		SetOnConnectHandler(func(cl paho.Client) { cl.Subscribe("stats/#", 1, nil) }).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.add(m.Topic(), m.Payload()) })
	cl, err := testkit.Connect(opts, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(100) })
	return s
}

func (s *mqttStats) writeURL() string { return "mqtt://" + s.addr() }

// stats returns the records received.
func (s *mqttStats) stats(t *testing.T) map[statsKey]statsSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Fatalf("%d bad messages, such as %s", len(s.bad), s.bad[0])
	}
	out := make(map[statsKey]statsSample, len(s.got))
	for k, v := range s.got {
		v.samples = len(s.ids[k])
		out[k] = v
	}
	return out
}

// add records the values of one message.
func (s *mqttStats) add(topic string, payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages++
	s.maxBytes = max(s.maxBytes, len(payload))
	device, ok := strings.CutPrefix(topic, "stats/gw-test/")
	if !ok {
		s.bad = append(s.bad, "topic "+topic)
		return
	}
	var err error
	switch s.payload {
	case "json":
		err = s.addJSON(device, payload)
	case "senml":
		err = s.addSenML(device, payload)
	case "influx":
		err = s.addInflux(device, payload)
	}
	if err != nil {
		s.bad = append(s.bad, fmt.Sprintf("%s: %v: %.200s", topic, err, payload))
	}
}

// set records the value of k, a record's value, with the id it came
// under.
func (s *mqttStats) set(k statsKey, v float64, id string) {
	s.got[k] = statsSample{ms: k.start, value: v}
	if s.ids[k] == nil {
		s.ids[k] = make(map[string]bool)
	}
	s.ids[k][id] = true
}

func (s *mqttStats) addJSON(device string, payload []byte) error {
	var m struct {
		Gateway, Device, Batch, Group string
		Stats                         []struct {
			ID, Device, Metric, Unit, Start string
			Count                           uint64
			Sum, Min, Max, Mean             float64
		}
	}
	if err := json.Unmarshal(payload, &m); err != nil {
		return err
	}
	if m.Gateway != "gw-test" || m.Device != device || m.Group != "minute" || m.Batch == "" || len(m.Stats) == 0 {
		return fmt.Errorf("gateway %q, device %q, group %q, batch %q, %d records", m.Gateway, m.Device, m.Group, m.Batch, len(m.Stats))
	}
	for _, r := range m.Stats {
		start, err := time.Parse(time.RFC3339Nano, r.Start)
		if err != nil || r.Device != device || r.ID == "" {
			return fmt.Errorf("record %+v", r)
		}
		k := statsKey{device: device, metric: r.Metric, start: start.UnixMilli()}
		for stat, v := range map[string]float64{"count": float64(r.Count), "sum": r.Sum, "min": r.Min, "max": r.Max, "mean": r.Mean} {
			k.stat = stat
			s.set(k, v, r.ID)
		}
	}
	return nil
}

// addSenML reads a pack with the gateway's own SenML decoder: a reading
// per SenML record, named <metric>_<stat>, at the period's start.
func (s *mqttStats) addSenML(device string, body []byte) error {
	var d payload.Decoder
	rs, ignored, err := d.Decode(nil, payload.FormatSenML, body, "", "", time.Now())
	if err != nil || ignored > 0 {
		return fmt.Errorf("%d ignored: %v", ignored, err)
	}
	var ids []struct {
		ID string `json:"cairn_id"`
	}
	if err := json.Unmarshal(body, &ids); err != nil || len(ids) != len(rs) || len(rs)%5 != 0 {
		return fmt.Errorf("%d readings of %d records: %v", len(rs), len(ids), err)
	}
	for i, r := range rs {
		metric, stat, ok := cutLast(r.Metric, "_")
		if r.Device != "urn:dev:cairn:gw-test:"+device || !ok || ids[i].ID == "" {
			return fmt.Errorf("reading %d: %+v, id %q", i, r, ids[i].ID)
		}
		s.set(statsKey{device: device, metric: metric, stat: stat, start: r.TS / 1e6}, r.Value, ids[i].ID)
	}
	return nil
}

// addInflux reads the lines of the HTTP upstreams' stats in line
// protocol: readings_stats,device=…,gateway=gw-test,group=minute,metric=…
// count=…i,sum=…,min=…,max=…,mean=… <ns>, its id its tags and time.
func (s *mqttStats) addInflux(device string, payload []byte) error {
	for _, line := range strings.Split(strings.TrimSuffix(string(payload), "\n"), "\n") {
		parts := strings.Split(line, " ")
		if len(parts) != 3 {
			return fmt.Errorf("line %q", line)
		}
		tags := make(map[string]string)
		for i, kv := range strings.Split(parts[0], ",") {
			k, v, _ := strings.Cut(kv, "=")
			if i == 0 && kv != "readings_stats" {
				return fmt.Errorf("measurement %q", kv)
			}
			tags[k] = v
		}
		ns, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || tags["device"] != device || tags["gateway"] != "gw-test" || tags["group"] != "minute" {
			return fmt.Errorf("line %q", line)
		}
		k := statsKey{device: device, metric: tags["metric"], start: ns / 1e6}
		for _, f := range strings.Split(parts[1], ",") {
			stat, v, _ := strings.Cut(f, "=")
			x, err := strconv.ParseFloat(strings.TrimSuffix(v, "i"), 64)
			if err != nil {
				return fmt.Errorf("field %q", f)
			}
			k.stat = stat
			s.set(k, x, parts[0]+" "+parts[2])
		}
	}
	return nil
}

// cutLast slices s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// TestMQTTUplink_Stats runs testStats (TestUplink_Stats) with an MQTT
// upstream in each payload format: cairn with data: stats, group: minute
// publishes the minute records of readings across two minutes to
// Mosquitto, then the first minute's again after late readings, then,
// after a SIGKILL with the broker down, the second minute's; each time a
// subscriber holds cairn's own /stats values, a record sent again under
// the same id as before.
func TestMQTTUplink_Stats(t *testing.T) {
	for _, payload := range []string{"json", "senml", "influx"} {
		t.Run(payload, func(t *testing.T) {
			up := newMQTTStats(t, payload)
			section := strings.NewReplacer("%URL%", up.writeURL(), "%FORMAT%", "mqtt").Replace(statsSection) +
				"  topic: stats/{gateway}/{device}\n  payload: " + payload + "\n  max_message_bytes: 1KiB\n"
			testStats(t, up, writeConfig(t, t.TempDir(), localConfig+section), payload, true)
			up.mu.Lock()
			defer up.mu.Unlock()
			// A message per device and batch at least: 3 + 3 + 1.
			if up.maxBytes > 1024 || up.messages < 7 {
				t.Errorf("%d messages of at most %d bytes, want 7 or more, none over 1 KiB", up.messages, up.maxBytes)
			}
			t.Logf("%d messages of at most %d bytes", up.messages, up.maxBytes)
		})
	}
}
