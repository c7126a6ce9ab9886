package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// The upstream broker of these tests is Mosquitto configured as AWS IoT
// Core is: TLS, a client certificate required, its CN the client's
// identity, and an ACL that lets the gateway publish only under its own
// topics, cairn/<gateway>/#.

// mqttUpstreamGateway is the gateway id of these tests, and the CN of
// cairn's client certificate.
const mqttUpstreamGateway = "gw-mq"

// mqttCloud is the upstream broker and the certificates of its clients.
type mqttCloud struct {
	*mosquitto
	ca                *testCA
	caFile            string
	certFile, keyFile string // cairn's
	readCert, readKey string // the subscriber's
	dir               string
}

// startMQTTCloud starts Mosquitto with one TLS listener that requires a
// client certificate signed by its CA, takes the certificate's CN as the
// user name, and lets gw-mq write only to cairn/gw-mq/# and reader read
// cairn/#; its database persists across a restart. extra is more lines
// of its configuration.
func startMQTTCloud(t *testing.T, extra string) *mqttCloud {
	t.Helper()
	me, err := currentUser()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := newTestCA(t, "cloud CA")
	c := &mqttCloud{ca: ca, dir: dir, caFile: writeFile(t, dir, "ca.pem", ca.pem, 0o644)}
	cert, key := ca.issue(t, "broker", true)
	gwCert, gwKey := ca.issue(t, mqttUpstreamGateway, false)
	c.certFile, c.keyFile = writeFile(t, dir, "gw.pem", gwCert, 0o644), writeFile(t, dir, "gw.key", gwKey, 0o600)
	rCert, rKey := ca.issue(t, "reader", false)
	c.readCert, c.readKey = writeFile(t, dir, "reader.pem", rCert, 0o644), writeFile(t, dir, "reader.key", rKey, 0o600)
	acl := writeFile(t, dir, "acl", []byte("user "+mqttUpstreamGateway+"\ntopic write cairn/"+mqttUpstreamGateway+"/#\n\nuser reader\ntopic read cairn/#\n"), 0o644)
	m := &mosquitto{bin: mosquittoBin(t), conf: filepath.Join(dir, "mosquitto.conf"), port: freePort(t)}
	conf := fmt.Sprintf(`per_listener_settings false
allow_anonymous false
acl_file %s
user %s
persistence true
persistence_location %s/
autosave_interval 1
max_inflight_messages 1000
max_queued_messages 1000000
listener %d 127.0.0.1
cafile %s
certfile %s
keyfile %s
require_certificate true
use_identity_as_username true
tls_version tlsv1.2
log_dest stderr
log_type error
log_type warning
%s`, acl, me, dir, m.port, c.caFile, writeFile(t, dir, "broker.pem", cert, 0o644), writeFile(t, dir, "broker.key", key, 0o600), extra)
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(t)
	c.mosquitto = m
	return c
}

// mqttUpstreamEntry is cairn's upstream entry for c, with the keys of
// extra (lines indented by four spaces) added.
func (c *mqttCloud) entry(extra string) string {
	return fmt.Sprintf(`uplink:
  - name: cloud
    kind: mqtt
    url: mqtts://127.0.0.1:%d
    gateway_id: %s
    batch_readings: 500
    interval: 100ms
    retry_wait_min: 200ms
    retry_wait_max: 1s
    timeout: 3s
    tls:
      ca_file: %s
      cert_file: %s
      key_file: %s
`, c.port, mqttUpstreamGateway, c.caFile, c.certFile, c.keyFile) + extra
}

// mqttReading is a reading of cairn's MQTT JSON messages.
type mqttReading struct {
	ID     string  `json:"id"`
	Metric string  `json:"metric"`
	Unit   string  `json:"unit"`
	Time   string  `json:"time"`
	Value  float64 `json:"value"`
}

// mqttSink subscribes to cairn/# on the upstream broker, with a
// persistent session, and records every reading it gets. It is safe for
// concurrent use.
type mqttSink struct {
	mu       sync.Mutex // guards the fields below
	byID     map[string]upstreamKey
	values   map[upstreamKey]float64
	received int // readings, duplicates included
	messages int
	bad      []string // what was wrong with messages
	maxBytes int
	// again counts, by batch id, the readings received again that cairn
	// sent again; redelivered those the broker delivered again itself (a
	// QoS 1 message to this subscriber unacknowledged when the broker
	// stopped goes again, with its DUP flag set, when it is back).
	again       map[string]int
	redelivered int
}

// subscribe connects the sink to c as reader.
func (c *mqttCloud) subscribe(t *testing.T) *mqttSink {
	t.Helper()
	s := &mqttSink{byID: make(map[string]upstreamKey), values: make(map[upstreamKey]float64), again: make(map[string]int)}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.pem)
	cert, err := tls.LoadX509KeyPair(c.readCert, c.readKey)
	if err != nil {
		t.Fatal(err)
	}
	opts := testkit.PublisherOptions(fmt.Sprintf("ssl://127.0.0.1:%d", c.port), "reader", startTimeout).
		SetTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}).
		SetCleanSession(false).
		SetAutoReconnect(true).
		SetMaxReconnectInterval(200 * time.Millisecond).
		SetOnConnectHandler(func(cl paho.Client) { cl.Subscribe("cairn/#", 1, nil) }).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.add(m.Topic(), m.Payload(), m.Duplicate()) })
	cl, err := testkit.Connect(opts, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(100) })
	return s
}

// add records the readings of one message; redelivery is its DUP flag.
func (s *mqttSink) add(topic string, payload []byte, redelivery bool) {
	var m struct {
		Gateway, Device, Batch string
		Readings               []mqttReading
	}
	err := json.Unmarshal(payload, &m)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages++
	s.maxBytes = max(s.maxBytes, len(payload))
	switch {
	case err != nil:
		s.bad = append(s.bad, fmt.Sprintf("%s: %v: %.100s", topic, err, payload))
		return
	case m.Gateway != mqttUpstreamGateway || topic != "cairn/"+m.Gateway+"/"+m.Device:
		s.bad = append(s.bad, fmt.Sprintf("%s: gateway %q, device %q", topic, m.Gateway, m.Device))
		return
	}
	for _, r := range m.Readings {
		ts, err := time.Parse(time.RFC3339Nano, r.Time)
		if err != nil || !strings.HasPrefix(r.ID, mqttUpstreamGateway+"-") {
			s.bad = append(s.bad, fmt.Sprintf("%s: reading %+v", topic, r))
			continue
		}
		k := upstreamKey{gateway: m.Gateway, device: m.Device, metric: r.Metric, ts: ts.UnixNano()}
		if old, seen := s.byID[r.ID]; seen && old != k {
			s.bad = append(s.bad, fmt.Sprintf("id %s is %+v and %+v", r.ID, old, k))
		} else if seen && redelivery {
			s.redelivered++
		} else if seen {
			s.again[m.Batch]++
		}
		s.byID[r.ID] = k
		s.values[k] = r.Value
		s.received++
	}
}

// counts returns the distinct ids seen and the readings received.
func (s *mqttSink) counts() (ids, received int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID), s.received
}

// checkResent checks that the readings cairn sent again are of at most
// batches batches, each of at most batchReadings, and says what was
// received twice.
func (s *mqttSink) checkResent(t *testing.T, batches, batchReadings int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.again))
	sum := 0
	for id, n := range s.again {
		ids = append(ids, id)
		sum += n
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, " %s: %d;", id, s.again[id])
		if n := s.again[id]; n > batchReadings {
			t.Errorf("%d readings of batch %s received twice, more than a batch (%d)", n, id, batchReadings)
		}
	}
	if len(ids) > batches {
		t.Errorf("readings of %d batches received twice, want at most %d:%s", len(ids), batches, b.String())
	}
	t.Logf("received twice: %d readings that cairn sent again (by batch:%s), %d that the broker delivered again", sum, b.String(), s.redelivered)
}

// check compares the readings of the acknowledged messages with what the
// sink holds: every one there once by id, with its value, and nothing
// else; and no message over maxBytes.
func (s *mqttSink) check(t *testing.T, msgs []sensorMessage, acks *ackLog, maxBytes int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	want := 0
	missing := 0
	for i, m := range msgs {
		if !acks.isAcked(i) {
			continue
		}
		for _, r := range m.readings(i) {
			want++
			v, ok := s.values[upstreamKey{gateway: mqttUpstreamGateway, device: r.Device, metric: r.Metric, ts: r.TS}]
			if !ok || v != r.Value {
				missing++
			}
		}
	}
	if missing > 0 || len(s.byID) != want || len(s.values) != want {
		t.Errorf("the subscriber holds %d ids and %d readings, want %d; %d missing or wrong", len(s.byID), len(s.values), want, missing)
	}
	if len(s.bad) > 0 {
		t.Errorf("%d bad messages, such as %s", len(s.bad), s.bad[0])
	}
	if s.maxBytes > maxBytes {
		t.Errorf("a message of %d bytes, over max_message_bytes %d", s.maxBytes, maxBytes)
	}
}

// TestMQTTUplink_ExactlyOnceAcrossRestarts runs cairn with an MQTT
// upstream, Mosquitto with client certificates and an ACL: the readings
// published to cairn arrive at a subscriber of the upstream broker, every
// one under its id, across a restart of the broker while a backlog goes
// and a SIGKILL of cairn; the only duplicates are of batches in flight.
func TestMQTTUplink_ExactlyOnceAcrossRestarts(t *testing.T) {
	bin := cairnBinary.get(t)
	cloud := startMQTTCloud(t, "")
	sink := cloud.subscribe(t)
	dataDir := t.TempDir()
	const maxBytes = 4096
	// A small window and a byte rate keep the backlog going for some
	// seconds, so that the broker's restart and the kill find batches in
	// flight.
	cfg := writeConfig(t, dataDir, localConfig+cloud.entry(fmt.Sprintf("    max_message_bytes: %d\n    inflight: 4\n    max_bytes_per_second: 128KiB\n", maxBytes)))
	p := startCairn(t, bin, cfg)
	fleet := &sensorFleet{devices: 4, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 3000)
	api := newAPIClient(p.http)

	waitUntil(t, 60*time.Second, "1,500 readings at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		return ids >= 1500, fmt.Sprintf("%d ids, %d readings", ids, got)
	})
	if st := uplinkStatuses(t, api)["cloud"]; st.PendingReadings == 0 {
		t.Fatalf("the backlog went before the broker's restart: %+v", st)
	}
	cloud.stop(t)
	cloud.start(t)
	waitUntil(t, 60*time.Second, "cairn to say the broker failed it", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return st.LastError != "", fmt.Sprintf("%+v", st)
	})
	waitUntil(t, 60*time.Second, "3,500 readings at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		return ids >= 3500, fmt.Sprintf("%d ids, %d readings", ids, got)
	})
	if st := uplinkStatuses(t, api)["cloud"]; st.PendingReadings == 0 {
		t.Fatalf("the backlog went before the kill: %+v", st)
	}
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}
	p = startCairn(t, bin, cfg)
	fleet.publishNew(t, p.mqtt, "dev", t0, 500)
	want := 2 * fleet.acks.count()
	api = newAPIClient(p.http)
	waitUntil(t, 60*time.Second, "every reading at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids >= want && st.PendingReadings == 0, fmt.Sprintf("%d ids of %d, %d readings; status %+v", ids, want, got, st)
	})
	sink.check(t, fleet.msgs, fleet.acks, maxBytes)
	ids, got := sink.counts()
	// A restart of the broker and a kill: each may send the batch in
	// flight again, 500 readings at most.
	sink.checkResent(t, 2, 500)
	t.Logf("%d readings once each, %d received in all, in %d messages of at most %d bytes", ids, got, sink.messages, sink.maxBytes)
}

// TestMQTTUplink_RefusalsAreCountedNotLooped: a broker that drops the
// connection on a message it will not take (Mosquitto's max_packet_size
// below cairn's max_message_bytes; AWS IoT Core does the same on a
// publish its policy forbids) and a broker that stops answering (a PUBACK
// that never comes) are refusals: counted, named in last_error with the
// topic, and tried again after a backoff, on little CPU. Once the broker
// takes messages again, every reading arrives.
func TestMQTTUplink_RefusalsAreCountedNotLooped(t *testing.T) {
	bin := cairnBinary.get(t)
	cloud := startMQTTCloud(t, "max_packet_size 2048\n")
	sink := cloud.subscribe(t)
	cfg := writeConfig(t, t.TempDir(), localConfig+cloud.entry("    max_message_bytes: 8KiB\n"))
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 1, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 300)

	waitUntil(t, 30*time.Second, "a refusal in status", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return st.Refused > 0, fmt.Sprintf("%+v", st)
	})
	before := uplinkStatuses(t, api)["cloud"]
	// The broker closes the connection; on a loaded machine the PUBACK's
	// timeout (3s) may pass before cairn sees that: either is the refusal.
	const want = "publish to cairn/" + mqttUpstreamGateway + "/dev-0: "
	if !strings.HasPrefix(before.LastError, want+"connection lost with the message unacknowledged") && !strings.HasPrefix(before.LastError, want+"no PUBACK in 3s") {
		t.Errorf("last_error %q, want it to begin %q and say the connection was lost or the PUBACK did not come", before.LastError, want)
	}
	cpu0, err := testkit.CPUTime(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// 20 s of refusals: cairn tries again after a backoff of up to
	// retry_wait_max (1s), not at once.
	waitUntil(t, 30*time.Second, "20 s of refusals", func() (bool, string) {
		return time.Since(start) >= 20*time.Second, ""
	})
	cpu1, err := testkit.CPUTime(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	after := uplinkStatuses(t, api)["cloud"]
	refused := after.Refused - before.Refused
	t.Logf("refusals: %d in %s, cairn used %s of CPU (%.1f%% of a core)", refused, elapsed.Round(time.Millisecond), cpu1-cpu0, 100*float64(cpu1-cpu0)/float64(elapsed))
	if share := float64(cpu1-cpu0) / float64(elapsed); share > 0.10 {
		t.Errorf("cairn used %s of CPU in %s of refusals (%.0f%% of a core), want under 10%%", cpu1-cpu0, elapsed, 100*share)
	}
	if refused < 5 || refused > uint64(elapsed/(100*time.Millisecond)) {
		t.Errorf("%d refusals in %s, want a few a second at most, and tries again", refused, elapsed)
	}
	if ids, _ := sink.counts(); ids > 0 {
		t.Errorf("the subscriber got %d readings of a batch the broker refused", ids)
	}

	// The broker without the limit takes them all.
	conf, err := os.ReadFile(cloud.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cloud.conf, []byte(strings.Replace(string(conf), "max_packet_size 2048\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cloud.stop(t)
	cloud.start(t)
	waitUntil(t, 30*time.Second, "every reading at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids >= 2*fleet.acks.count() && st.PendingReadings == 0, fmt.Sprintf("%d ids, %d readings; status %+v", ids, got, st)
	})

	// A broker that stops answering: no PUBACK within timeout (3s).
	if err := cloud.proc.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	cont := func() {
		if stopped {
			stopped = false
			if err := cloud.proc.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(cont)
	fleet.publishNew(t, p.mqtt, "dev", t0, 100)
	waitUntil(t, 30*time.Second, "a PUBACK to time out", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return strings.Contains(st.LastError, "no PUBACK in 3s"), fmt.Sprintf("%+v", st)
	})
	cont()
	waitUntil(t, 30*time.Second, "every reading at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids >= 2*fleet.acks.count() && st.PendingReadings == 0, fmt.Sprintf("%d ids, %d readings; status %+v", ids, got, st)
	})
	sink.check(t, fleet.msgs, fleet.acks, 8<<10)
}

// TestMQTTUplink_SNIAndALPN sends to a broker behind a TLS front that,
// like AWS IoT Core on port 443, takes only connections that ask for the
// ALPN protocol x-amzn-mqtt-ca: cairn sends tls.server_name as SNI and
// offers tls.alpn, and its readings arrive at the broker behind.
func TestMQTTUplink_SNIAndALPN(t *testing.T) {
	mq := startMosquitto(t)
	got := make(chan paho.Message, 16)
	sub, err := testkit.ConnectPublisher(mq.addr(), "reader", startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Disconnect(100) })
	waitToken(t, sub.Subscribe("cairn/#", 1, func(_ paho.Client, m paho.Message) { got <- m }))

	ca := newTestCA(t, "front CA")
	certPEM, keyPEM := ca.issue(t, "iot.example", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	type hello struct {
		sni    string
		protos []string
	}
	hellos := make(chan hello, 16)
	front, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"x-amzn-mqtt-ca"},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hellos <- hello{h.ServerName, h.SupportedProtos}
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	go func() {
		for {
			c, err := front.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil || tc.ConnectionState().NegotiatedProtocol != "x-amzn-mqtt-ca" {
					return
				}
				back, err := net.Dial("tcp", mq.addr())
				if err != nil {
					return
				}
				defer back.Close()
				go io.Copy(back, c)
				io.Copy(c, back)
			}()
		}
	}()

	dir := t.TempDir()
	cfg := writeConfig(t, dir, localConfig+fmt.Sprintf(`uplink:
  - name: cloud
    kind: mqtt
    url: mqtts://%s
    gateway_id: %s
    interval: 100ms
    tls:
      ca_file: %s
      server_name: iot.example
      alpn: [x-amzn-mqtt-ca]
`, front.Addr(), mqttUpstreamGateway, writeFile(t, dir, "ca.pem", ca.pem, 0o644)))
	d := startDaemon(t, cfg)
	pub := mustConnect(t, d.mqtt, "sensor")
	if err := publish1(pub, "sensors/kitchen/telemetry", `{"temperature":21.5}`); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if want := "cairn/" + mqttUpstreamGateway + "/kitchen"; m.Topic() != want || !strings.Contains(string(m.Payload()), `"value":21.5`) {
			t.Errorf("got %s %s, want the reading on %s", m.Topic(), m.Payload(), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no message behind the TLS front in 30 s; status %+v", uplinkStatuses(t, newAPIClient(d.http))["cloud"])
	}
	h := <-hellos
	if h.sni != "iot.example" || len(h.protos) != 1 || h.protos[0] != "x-amzn-mqtt-ca" {
		t.Errorf("cairn's TLS hello: SNI %q, ALPN %q; want iot.example and [x-amzn-mqtt-ca]", h.sni, h.protos)
	}
}

// TestMQTTUplink_Password logs in at the upstream broker with
// auth.username and auth.password_file (HiveMQ Cloud, EMQX): with a
// password the broker does not take, nothing goes and last_error says
// why; once the broker takes it (its password file changed and
// reloaded), the reading arrives, over mqtt:// without TLS.
func TestMQTTUplink_Password(t *testing.T) {
	broker, passwd := startMosquittoAuth(t, "gw", "not-what-cairn-has", "")
	sub := make(chan paho.Message, 16)
	mosquittoPasswd(t, passwd, "reader", "reader-pass")
	if err := broker.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	opts := testkit.PublisherOptions("tcp://"+broker.addr(), "reader", startTimeout).SetUsername("reader").SetPassword("reader-pass")
	var reader paho.Client
	waitUntil(t, startTimeout, "the reader to log in", func() (bool, string) {
		c, err := testkit.Connect(opts, startTimeout)
		if err != nil {
			return false, err.Error()
		}
		reader = c
		return true, ""
	})
	t.Cleanup(func() { reader.Disconnect(100) })
	waitToken(t, reader.Subscribe("cairn/#", 1, func(_ paho.Client, m paho.Message) { sub <- m }))

	dir := t.TempDir()
	pass := writeFile(t, dir, "mqtt-pass", []byte("what-cairn-has\n"), 0o600)
	cfg := writeConfig(t, dir, localConfig+fmt.Sprintf(`uplink:
  - name: cloud
    kind: mqtt
    url: mqtt://%s
    gateway_id: %s
    interval: 100ms
    retry_wait_min: 100ms
    retry_wait_max: 500ms
    auth:
      username: gw
      password_file: %s
`, broker.addr(), mqttUpstreamGateway, pass))
	d := startDaemon(t, cfg)
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "sensor")
	if err := publish1(pub, "sensors/kitchen/telemetry", `{"temperature":21.5}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "last_error to say the broker refused the login", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return strings.Contains(st.LastError, "not Authorized") || strings.Contains(st.LastError, "not authorised"), st.LastError
	})
	select {
	case m := <-sub:
		t.Fatalf("got %s %s before cairn could log in", m.Topic(), m.Payload())
	default:
	}
	mosquittoPasswd(t, passwd, "gw", "what-cairn-has")
	if err := broker.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub:
		if !strings.Contains(string(m.Payload()), `"value":21.5`) {
			t.Errorf("got %s %s, want the reading", m.Topic(), m.Payload())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no message in 30 s after the password was set; status %+v", uplinkStatuses(t, api)["cloud"])
	}
}

// TestMQTTUplink_MosquittoACLRefusalIsHidden pins down what
// docs/uplink.md says of Mosquitto 2.0's ACL: a QoS 1 publish its ACL
// forbids is acknowledged to an MQTT 3.1.1 client, as cairn is, and
// dropped, so cairn cannot tell it from one taken. The readings on the
// allowed topic arrive; those on the forbidden one do not, and cairn
// counts them sent. Should this test fail, the refusal has become
// visible, and the docs must say what cairn does with it.
func TestMQTTUplink_MosquittoACLRefusalIsHidden(t *testing.T) {
	cloud := startMQTTCloud(t, "")
	sink := cloud.subscribe(t)
	// "{device}/{gateway}" puts device cairn under cairn/gw-mq, which
	// the ACL allows, and device other under other/gw-mq, which it does
	// not.
	cfg := writeConfig(t, t.TempDir(), localConfig+cloud.entry("    topic: \"{device}/{gateway}\"\n"))
	d := startDaemon(t, cfg)
	api := newAPIClient(d.http)
	pub := mustConnect(t, d.mqtt, "sensor")
	for _, dev := range []string{"other", "cairn"} {
		if err := publish1(pub, "sensors/"+dev+"/telemetry", `{"temperature":21.5}`); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "both readings sent", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return st.SentReadings == 2 && st.PendingReadings == 0, fmt.Sprintf("%+v", st)
	})
	waitUntil(t, 30*time.Second, "the allowed reading at the subscriber", func() (bool, string) {
		s := sink
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.messages > 0, ""
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	// Both went in one batch, device other's message first, and
	// Mosquitto keeps the order: had it delivered that one, it would be
	// here already. The sink takes only cairn/<gateway>/<device> topics: the one
	// message it got is the allowed one, on cairn/gw-mq.
	if sink.messages != 1 || len(sink.bad) != 1 || !strings.HasPrefix(sink.bad[0], "cairn/"+mqttUpstreamGateway+": ") {
		t.Errorf("the subscriber got %d messages (%q), want only device cairn's", sink.messages, sink.bad)
	}
	if st := uplinkStatuses(t, api)["cloud"]; st.Refused != 0 || st.LastError != "" {
		t.Errorf("cairn saw a refusal: %+v", st)
	}
}
