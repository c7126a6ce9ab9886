package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// readingSink subscribes to every topic of one or more brokers and counts
// the readings of cairn's MQTT messages, JSON or SenML, by series and
// time, and by the first level of their topic. It is safe for concurrent
// use.
type readingSink struct {
	mu       sync.Mutex // guards the fields below
	got      map[upstreamKey]int
	values   map[upstreamKey]float64
	byPrefix map[string]int // readings by the topic's first level
	bad      []string
}

func newReadingSink() *readingSink {
	return &readingSink{got: make(map[upstreamKey]int), values: make(map[upstreamKey]float64), byPrefix: make(map[string]int)}
}

// subscribe subscribes s to # on the broker at addr as the user (""
// for none), with a persistent session.
func (s *readingSink) subscribe(t *testing.T, addr, user, password string) {
	t.Helper()
	opts := testkit.PublisherOptions("tcp://"+addr, "reload-reader", startTimeout).
		SetCleanSession(false).
		SetAutoReconnect(true).
		SetMaxReconnectInterval(200 * time.Millisecond).
		SetOnConnectHandler(func(cl paho.Client) { cl.Subscribe("#", 1, nil) }).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.add(m.Topic(), m.Payload()) })
	if user != "" {
		opts.SetUsername(user).SetPassword(password)
	}
	var cl paho.Client
	waitUntil(t, startTimeout, "the reader to connect to "+addr, func() (bool, string) {
		c, err := testkit.Connect(opts, startTimeout)
		if err != nil {
			return false, err.Error()
		}
		cl = c
		return true, ""
	})
	t.Cleanup(func() { cl.Disconnect(100) })
}

// add records the readings of one message.
func (s *readingSink) add(topic string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix, _, _ := strings.Cut(topic, "/")
	fail := func(err error) { s.bad = append(s.bad, fmt.Sprintf("%s: %v: %.200s", topic, err, body)) }
	if len(body) > 0 && body[0] == '[' {
		var d payload.Decoder
		rs, ignored, err := d.Decode(nil, payload.FormatSenML, body, "", "", time.Now())
		if err != nil || ignored > 0 {
			fail(fmt.Errorf("%d ignored: %v", ignored, err))
			return
		}
		for _, r := range rs {
			device, ok := strings.CutPrefix(r.Device, "urn:dev:cairn:"+mqttUpstreamGateway+":")
			if !ok {
				fail(fmt.Errorf("device %q", r.Device))
				return
			}
			s.record(prefix, upstreamKey{gateway: mqttUpstreamGateway, device: device, metric: r.Metric, ts: r.TS}, r.Value)
		}
		return
	}
	var m struct {
		Gateway, Device string
		Readings        []mqttReading
	}
	if err := json.Unmarshal(body, &m); err != nil {
		fail(err)
		return
	}
	for _, r := range m.Readings {
		ts, err := time.Parse(time.RFC3339Nano, r.Time)
		if err != nil {
			fail(err)
			return
		}
		s.record(prefix, upstreamKey{gateway: m.Gateway, device: m.Device, metric: r.Metric, ts: ts.UnixNano()}, r.Value)
	}
}

func (s *readingSink) record(prefix string, k upstreamKey, v float64) {
	s.got[k]++
	s.values[k] = v
	s.byPrefix[prefix]++
}

// counts returns the readings received on topics under prefix.
func (s *readingSink) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPrefix[prefix]
}

// check compares the readings of the acknowledged messages with what s
// holds: every one there exactly once, with its value, and nothing else.
func (s *readingSink) check(t *testing.T, f *sensorFleet) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	want, missing, twice := 0, 0, 0
	for i, m := range f.msgs {
		if !f.acks.isAcked(i) {
			continue
		}
		for _, r := range m.readings(i) {
			want++
			k := upstreamKey{gateway: mqttUpstreamGateway, device: r.Device, metric: r.Metric, ts: r.TS}
			if n := s.got[k]; n == 0 || s.values[k] != r.Value {
				missing++
			} else if n > 1 {
				twice++
			}
		}
	}
	if missing > 0 || twice > 0 || len(s.got) != want {
		t.Errorf("the subscribers hold %d readings, want %d: %d missing or wrong, %d received more than once", len(s.got), want, missing, twice)
	}
	if len(s.bad) > 0 {
		t.Errorf("%d bad messages, such as %s", len(s.bad), s.bad[0])
	}
}

// TestMQTTUplink_Reload changes an MQTT upstream's settings in the file
// and sends SIGHUP to cairn while a backlog goes: the topic and the
// payload, then the broker's URL and the credentials, then the
// credentials again. Each change takes effect at once, on a new
// connection, and the readings the broker had taken of the batch in
// flight do not go again: in the end every reading is at the
// subscribers exactly once. Two bad changes (a topic with a wildcard, a
// password file that is missing) are refused with the key and the
// reason, and the upstream goes on as it was.
func TestMQTTUplink_Reload(t *testing.T) {
	// Both protocols: over MQTT 5 the publishes in flight must outlive the
	// batch abandoned for the reload, or their PUBACKs go unseen.
	for _, version := range []string{"3.1.1", "5"} {
		t.Run(version, func(t *testing.T) { testMQTTReload(t, version) })
	}
}

// testMQTTReload is TestMQTTUplink_Reload over one MQTT version.
func testMQTTReload(t *testing.T, version string) {
	bin := cairnBinary.get(t)
	brokerA := startMosquitto(t)
	brokerB, passwd := startMosquittoAuth(t, "gw", "pass-1", "")
	mosquittoPasswd(t, passwd, "gw2", "pass-2")
	mosquittoPasswd(t, passwd, "reader", "reader-pass")
	if err := brokerB.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	sink := newReadingSink()
	sink.subscribe(t, brokerA.addr(), "", "")
	sink.subscribe(t, brokerB.addr(), "reader", "reader-pass")

	dataDir := t.TempDir()
	passFile := writeFile(t, dataDir, "mqtt-pass", []byte("pass-1\n"), 0o600)
	section := func(url, topic, payload, auth string) string {
		return localConfig + fmt.Sprintf(`uplink:
  - name: cloud
    kind: mqtt
    url: %s
    gateway_id: %s
    topic: %s
    payload: %s
    batch_readings: 200
    interval: 100ms
    retry_wait_min: 200ms
    retry_wait_max: 1s
    timeout: 3s
    inflight: 4
    max_message_bytes: 1KiB
    max_bytes_per_second: 24KiB
    mqtt_version: %s
%s`, url, mqttUpstreamGateway, topic, payload, version, auth)
	}
	auth := func(user, file string) string {
		return fmt.Sprintf("    auth:\n      username: %s\n      password_file: %s\n", user, file)
	}
	cfg := writeConfig(t, dataDir, section("mqtt://"+brokerA.addr(), "a/{gateway}/{device}", "json", ""))
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 4, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 600)

	applied := 0
	// reload writes the file and sends SIGHUP while a batch goes, and
	// waits until cairn says it applied the upstream's change.
	reload := func(content, prefix string) {
		t.Helper()
		fleet.publishNew(t, p.mqtt, "dev", t0, 600)
		before := sink.count(prefix)
		waitUntil(t, time.Minute, "readings on "+prefix+"/", func() (bool, string) {
			return sink.count(prefix) >= before+100, fmt.Sprintf("%d", sink.count(prefix))
		})
		if st := uplinkStatuses(t, api)["cloud"]; st.PendingReadings == 0 {
			t.Fatalf("nothing pending at the reload: %+v", st)
		}
		rewrite(t, cfg, strings.ReplaceAll(content, "%DATA%", dataDir))
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		applied++
		if _, err := p.out.WaitLines(`msg="reload: uplink applied" component=reload upstream=cloud`, applied, p.Exited(), startTimeout); err != nil {
			t.Fatalf("reload %d not applied: %v\n%s", applied, err, p.out)
		}
	}

	reload(section("mqtt://"+brokerA.addr(), "b/{gateway}/{device}", "senml", ""), "a")
	reload(section("mqtt://"+brokerB.addr(), "c/{gateway}/{device}", "json", auth("gw", passFile)), "b")
	// Only gw2 may log in from now on; connections open stay.
	if err := os.WriteFile(passFile, []byte("pass-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(section("mqtt://"+brokerB.addr(), "c/{gateway}/{device}", "json", auth("gw2", passFile)), "c")
	mosquittoPasswd(t, passwd, "gw", "not-any-more")
	if err := brokerB.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}

	// Bad changes: refused, and the upstream goes on as it was.
	for i, tc := range []struct{ content, want string }{
		{section("mqtt://"+brokerB.addr(), "d/+/{device}", "json", auth("gw2", passFile)),
			`uplink[0].topic: a topic to publish to has no wildcard + or #`},
		{section("mqtt://"+brokerB.addr(), "d/{gateway}/{device}", "json", auth("gw2", passFile+".missing")),
			`uplink[0].auth.password_file`},
	} {
		rewrite(t, cfg, strings.ReplaceAll(tc.content, "%DATA%", dataDir))
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		line, err := p.out.WaitLines(`msg="reload: configuration not applied, still running with the previous one"`, i+1, p.Exited(), startTimeout)
		if err != nil {
			t.Fatalf("bad change %d: %v\n%s", i, err, p.out)
		}
		if !strings.Contains(line[i], tc.want) || !strings.Contains(line[i], cfg) {
			t.Errorf("bad change %d: %s\nwant it to name %s and %s", i, line[i], cfg, tc.want)
		}
	}
	before := sink.count("c")
	fleet.publishNew(t, p.mqtt, "dev", t0, 300)
	waitUntil(t, 2*time.Minute, "every reading at the subscribers", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return st.PendingReadings == 0 && sink.count("c") >= before+600, fmt.Sprintf("%d on c/; %+v", sink.count("c"), st)
	})
	if st := uplinkStatuses(t, api)["cloud"]; st.Failing() || st.URL != "mqtt://"+brokerB.addr() {
		t.Errorf("after the bad changes: %+v; want the upstream at %s, not failing", st, brokerB.addr())
	}
	if n := sink.count("d"); n > 0 {
		t.Errorf("%d readings on d/, the topic of a change refused", n)
	}
	sink.check(t, fleet)
	t.Logf("readings by topic: a/ %d, b/ %d, c/ %d", sink.count("a"), sink.count("b"), sink.count("c"))
}
