package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/listeners"
	"github.com/cairn-gateway/cairn/third_party/mochi/packets"
	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/scripts/testkit"
	"github.com/cairn-gateway/cairn/uplink"
)

// The upstream of these tests is an MQTT broker (mochi) over TLS that
// logs devices in as Azure IoT Hub does: the client id is the device
// id, the user name {hub}/{device}/?api-version=…, the password a SAS
// token whose signature, HMAC-SHA256 keyed with the device key over the
// URL-encoded resource URI, a newline and the expiry, it checks; it
// refuses a token that has expired or is not signed with the key, and
// closes a connection when its token expires. Mosquitto cannot check
// such tokens.

// azureHubHost is the hub's name: its certificate's, and the one its
// tokens name.
const azureHubHost = "cairn-test.azure-devices.net"

// azureDevice is the device cairn logs in as.
const azureDevice = "pi-kitchen"

// azureHub is the broker and what it saw.
type azureHub struct {
	srv    *mqtt.Server
	addr   string // 127.0.0.1:port
	caFile string
	key    []byte // the device key, decoded

	mu       sync.Mutex      // guards the fields below
	tokens   map[string]bool // the tokens the device connected with
	refused  []string        // why logins were refused
	refusals []time.Time     // when
	expired  int             // connections closed as their token expired
	timers   []*time.Timer
}

// startAzureHub starts the hub with the device key (base64); a reader
// logs in as reader with the password reader.
func startAzureHub(t *testing.T, key string) *azureHub {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := newTestCA(t, "hub CA")
	certPEM, keyPEM := ca.issue(t, azureHubHost, true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	h := &azureHub{key: k, caFile: writeFile(t, dir, "ca.pem", ca.pem, 0o644), tokens: make(map[string]bool)}
	h.addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	h.srv = mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := h.srv.AddHook(&azureAuth{hub: h}, nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "hub", Address: h.addr, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if err := h.srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.mu.Lock()
		for _, tm := range h.timers {
			tm.Stop()
		}
		h.mu.Unlock()
		h.srv.Close()
	})
	return h
}

// errTokenExpired closes a connection whose token has expired.
var errTokenExpired = errors.New("SAS token expired")

// login checks a device's CONNECT as IoT Hub does and returns when its
// token expires.
func (h *azureHub) login(clientID, user, password string, now time.Time) (time.Time, error) {
	if clientID != azureDevice {
		return time.Time{}, fmt.Errorf("client id %q is not the device id", clientID)
	}
	if !strings.HasPrefix(user, azureHubHost+"/"+azureDevice+"/?api-version=") {
		return time.Time{}, fmt.Errorf("user name %q", user)
	}
	fields, ok := strings.CutPrefix(password, "SharedAccessSignature ")
	if !ok {
		return time.Time{}, fmt.Errorf("not a SAS token: %q", password)
	}
	raw := map[string]string{}
	for _, f := range strings.Split(fields, "&") {
		k, v, _ := strings.Cut(f, "=")
		raw[k] = v
	}
	sr, err := url.QueryUnescape(raw["sr"])
	if err != nil || !strings.EqualFold(sr, azureHubHost+"/devices/"+azureDevice) {
		return time.Time{}, fmt.Errorf("resource %q is not the device's", raw["sr"])
	}
	se, err := strconv.ParseInt(raw["se"], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("expiry %q", raw["se"])
	}
	sig, err := url.QueryUnescape(raw["sig"])
	if err != nil {
		return time.Time{}, fmt.Errorf("signature %q", raw["sig"])
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return time.Time{}, fmt.Errorf("signature %q", raw["sig"])
	}
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte(raw["sr"] + "\n" + raw["se"]))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return time.Time{}, errors.New("signature does not match the device key")
	}
	expiry := time.Unix(se, 0)
	if !now.Before(expiry) {
		return time.Time{}, fmt.Errorf("token expired at %s", expiry.UTC().Format(time.RFC3339))
	}
	return expiry, nil
}

// azureAuth is the hub's mochi hook.
type azureAuth struct {
	mqtt.HookBase
	hub *azureHub
}

func (a *azureAuth) ID() string { return "azure-sas" }

func (a *azureAuth) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}

// OnConnectAuthenticate lets the reader in, and the device with a valid
// token until the token expires.
func (a *azureAuth) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	user, pass := string(pk.Connect.Username), string(pk.Connect.Password)
	if user == "reader" {
		return pass == "reader"
	}
	h := a.hub
	expiry, err := h.login(cl.ID, user, pass, time.Now())
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.refused = append(h.refused, err.Error())
		h.refusals = append(h.refusals, time.Now())
		return false
	}
	h.tokens[pass] = true
	h.timers = append(h.timers, time.AfterFunc(time.Until(expiry), func() {
		if cl.Closed() {
			return
		}
		h.mu.Lock()
		h.expired++
		h.mu.Unlock()
		cl.Stop(errTokenExpired)
	}))
	return true
}

// OnACLCheck lets the device publish to its events topic only, and the
// reader read it.
func (a *azureAuth) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if string(cl.Properties.Username) == "reader" {
		return !write
	}
	return write && strings.HasPrefix(topic, "devices/"+azureDevice+"/messages/events/")
}

// state returns the tokens the device connected with, the refusals and
// the connections closed for their token's expiry.
func (h *azureHub) state() (tokens int, refused []string, refusals []time.Time, expired int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tokens), append([]string(nil), h.refused...), append([]time.Time(nil), h.refusals...), h.expired
}

// tlsConfig is a client's TLS configuration for the hub.
func (h *azureHub) tlsConfig(t *testing.T) *tls.Config {
	t.Helper()
	pool, err := loadCAs(h.caFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, ServerName: azureHubHost}
}

// connectDevice connects as the device with the token, and disconnects.
func (h *azureHub) connectDevice(t *testing.T, token string) error {
	t.Helper()
	opts := testkit.PublisherOptions("ssl://"+h.addr, azureDevice, startTimeout).
		SetProtocolVersion(4).
		SetTLSConfig(h.tlsConfig(t)).
		SetUsername(azureHubHost + "/" + azureDevice + "/?api-version=2021-04-12").
		SetPassword(token)
	c, err := testkit.Connect(opts, startTimeout)
	if err != nil {
		return err
	}
	c.Disconnect(0)
	return nil
}

// azureSink counts the readings of the device's messages by id.
type azureSink struct {
	mu     sync.Mutex // guards the fields below
	count  map[string]int
	values map[float64]int
	bad    []string
}

// subscribe connects a reader to the hub's device events.
func (h *azureHub) subscribe(t *testing.T) *azureSink {
	t.Helper()
	s := &azureSink{count: make(map[string]int), values: make(map[float64]int)}
	opts := testkit.PublisherOptions("ssl://"+h.addr, "reader", startTimeout).
		SetTLSConfig(h.tlsConfig(t)).
		SetUsername("reader").SetPassword("reader").
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.add(m.Topic(), m.Payload()) })
	c, err := testkit.Connect(opts, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	waitToken(t, c.Subscribe("devices/+/messages/events/#", 1, nil))
	return s
}

// add records one message's readings.
func (s *azureSink) add(topic string, payload []byte) {
	var m struct {
		Gateway, Device string
		Readings        []mqttReading
	}
	err := json.Unmarshal(payload, &m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || topic != "devices/"+azureDevice+"/messages/events/" || m.Gateway != mqttUpstreamGateway {
		s.bad = append(s.bad, fmt.Sprintf("%s: %v: %.100s", topic, err, payload))
		return
	}
	for _, r := range m.Readings {
		s.count[r.ID]++
		s.values[r.Value]++
	}
}

// received returns the distinct ids received.
func (s *azureSink) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.count)
}

// check reports what is wrong: values 0 … n-1 each once, under ids each
// once, and no bad message.
func (s *azureSink) check(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.count {
		if c != 1 {
			t.Errorf("reading %s arrived %d times", id, c)
		}
	}
	for i := range n {
		if c := s.values[float64(i)]; c != 1 {
			t.Errorf("value %d arrived %d times", i, c)
		}
	}
	if len(s.count) != n || len(s.values) != n {
		t.Errorf("got %d ids and %d values, want %d", len(s.count), len(s.values), n)
	}
	if len(s.bad) > 0 {
		t.Errorf("%d bad messages, such as %s", len(s.bad), s.bad[0])
	}
}

// azureConfig is cairn with an upstream to the hub, logging in with the
// key in keyFile, its tokens living lifetime; extra is more keys of the
// upstream, lines indented by four spaces.
func (h *azureHub) azureConfig(keyFile, lifetime, extra string) string {
	return localConfig + fmt.Sprintf(`uplink:
  - name: hub
    kind: mqtt
    url: mqtts://%s
    gateway_id: %s
    interval: 100ms
    retry_wait_min: 200ms
    retry_wait_max: 1s
    timeout: 3s
    tls:
      ca_file: %s
      server_name: %s
    azure:
      device_id: %s
      key_file: %s
      token_lifetime: %s
`, h.addr, mqttUpstreamGateway, h.caFile, azureHubHost, azureDevice, keyFile, lifetime) + extra
}

// TestMQTTUplink_AzureSASRenewed runs cairn with an upstream to the hub,
// its tokens living 5 s, while readings are published to cairn: cairn
// connects again with a new token before the old one expires, at least
// twice, so the hub never has to close its connection, and every reading
// arrives once; the renewals are in the log as routine, not as errors,
// and the status has none. Left idle, cairn's connection is closed by the
// hub when its token expires, and the next reading goes on a new one.
func TestMQTTUplink_AzureSASRenewed(t *testing.T) {
	bin := cairnBinary.get(t)
	hub := startAzureHub(t, testDeviceKey)
	sas, err := uplink.NewAzureSAS(azureHubHost, azureDevice, testDeviceKey)
	if err != nil {
		t.Fatal(err)
	}
	// The hub checks tokens: an expired one, and one of another key, are
	// refused; a good one is taken.
	if err := hub.connectDevice(t, sas.Token(time.Now().Add(-time.Second))); err == nil {
		t.Fatal("the hub took an expired token")
	}
	other, err := uplink.NewAzureSAS(azureHubHost, azureDevice, base64.StdEncoding.EncodeToString([]byte("another device key, 32 bytes...")))
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.connectDevice(t, other.Token(time.Now().Add(time.Hour))); err == nil {
		t.Fatal("the hub took a token of another key")
	}
	if err := hub.connectDevice(t, sas.Token(time.Now().Add(time.Hour))); err != nil {
		t.Fatalf("the hub refused a good token: %v", err)
	}
	if _, refused, _, _ := hub.state(); len(refused) != 2 || !strings.Contains(refused[0], "expired") || !strings.Contains(refused[1], "signature") {
		t.Fatalf("the hub refused %q, want an expired token and a bad signature", refused)
	}
	sink := hub.subscribe(t)
	tokensBefore, _, _, _ := hub.state()

	dir := t.TempDir()
	keyFile := writeFile(t, t.TempDir(), "device.key", []byte(testDeviceKey+"\n"), 0o600)
	cairn := startCairn(t, bin, writeConfig(t, dir, hub.azureConfig(keyFile, "5s", "")))
	api := newAPIClient(cairn.http)
	pub := mustConnect(t, cairn.mqtt, "sensor")

	// Publish a reading every 20 ms until the device has connected with
	// three tokens: the first and two renewals.
	stop := make(chan struct{})
	published := make(chan int)
	var pubErr error
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		n := 0
		defer func() { published <- n }()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if pubErr = publish1(pub, "sensors/kitchen/telemetry", fmt.Sprintf(`{"temperature":%d}`, n)); pubErr != nil {
				return
			}
			n++
		}
	}()
	waitUntil(t, 60*time.Second, "cairn to connect with three tokens", func() (bool, string) {
		tokens, refused, _, expired := hub.state()
		return tokens-tokensBefore >= 3, fmt.Sprintf("tokens %d, refused %q, expired %d", tokens-tokensBefore, refused, expired)
	})
	close(stop)
	n := <-published
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	waitUntil(t, 30*time.Second, "every reading at the reader", func() (bool, string) {
		got := sink.received()
		return got >= n, fmt.Sprintf("%d of %d; status %+v", got, n, uplinkStatuses(t, api)["hub"])
	})
	if _, refused, _, expired := hub.state(); expired != 0 || len(refused) != 2 {
		t.Errorf("while readings went, the hub closed %d connections whose token expired and refused %q: cairn did not renew in time", expired, refused[2:])
	}

	// Idle, the connection outlives its token: the hub closes it, and
	// the next reading goes on a new connection.
	waitUntil(t, 30*time.Second, "the hub to close the idle connection as its token expires", func() (bool, string) {
		_, _, _, expired := hub.state()
		return expired >= 1, fmt.Sprintf("expired %d", expired)
	})
	if err := publish1(pub, "sensors/kitchen/telemetry", fmt.Sprintf(`{"temperature":%d}`, n)); err != nil {
		t.Fatal(err)
	}
	n++
	waitUntil(t, 30*time.Second, "the reading after the idle connection was closed", func() (bool, string) {
		got := sink.received()
		return got >= n, fmt.Sprintf("%d of %d; status %+v", got, n, uplinkStatuses(t, api)["hub"])
	})
	sink.check(t, n)

	st := uplinkStatuses(t, api)["hub"]
	if st.LastError != "" || st.Retries != 0 || st.Refused != 0 || st.SentReadings != uint64(n) || st.PendingReadings != 0 {
		t.Errorf("status %+v: want %d readings sent, and no error, retry or refusal", st, n)
	}
	renewals := cairn.out.Matching("renewing the SAS token")
	if len(renewals) < 2 {
		t.Errorf("the log has %d renewals, want 2 or more:\n%s", len(renewals), cairn.out)
	}
	for _, l := range renewals {
		if !strings.Contains(l, "level=INFO") || !strings.Contains(l, "device="+azureDevice) {
			t.Errorf("renewal logged as %q, want level INFO and the device", l)
		}
	}
	for _, l := range cairn.out.Matching("component=uplink") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("the uplink logged %q", l)
		}
	}
}

// TestMQTTUplink_AzureWrongKeyRefused runs cairn with a device key the
// hub does not know: every login is refused, and cairn says so in its
// status and log, naming the device, and tries again after a backoff
// that grows, never in a busy loop; nothing is sent, nothing is lost.
func TestMQTTUplink_AzureWrongKeyRefused(t *testing.T) {
	bin := cairnBinary.get(t)
	hub := startAzureHub(t, testDeviceKey)
	sink := hub.subscribe(t)
	dir := t.TempDir()
	wrong := base64.StdEncoding.EncodeToString([]byte("not the key the hub has for it.."))
	keyFile := writeFile(t, t.TempDir(), "device.key", []byte(wrong+"\n"), 0o600)
	cairn := startCairn(t, bin, writeConfig(t, dir, hub.azureConfig(keyFile, "1h", "")))
	api := newAPIClient(cairn.http)
	pub := mustConnect(t, cairn.mqtt, "sensor")
	if err := publish1(pub, "sensors/kitchen/telemetry", `{"temperature":21.5}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "five refused logins", func() (bool, string) {
		_, refused, _, _ := hub.state()
		return len(refused) >= 5, fmt.Sprintf("%q", refused)
	})
	_, refused, at, _ := hub.state()
	for _, r := range refused {
		if r != "signature does not match the device key" {
			t.Errorf("the hub refused a login for %q, want a signature that does not match", r)
		}
	}
	// retry_wait_min 200ms doubles up to retry_wait_max 1s, less up to
	// half at random: no two attempts closer than 100 ms.
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 100*time.Millisecond {
			t.Errorf("attempts %d and %d %s apart, want a backoff of 100 ms or more", i, i+1, gap)
		}
	}
	if span, least := at[len(at)-1].Sub(at[0]), 100*time.Millisecond+200*time.Millisecond+400*time.Millisecond+500*time.Millisecond; span < least {
		t.Errorf("5 attempts in %s, want a backoff that grows: %s or more", span, least)
	}
	t.Logf("%d attempts in %s", len(at), at[len(at)-1].Sub(at[0]))
	st := uplinkStatuses(t, api)["hub"]
	want := "the hub refused the SAS token of device " + azureDevice
	if !strings.Contains(st.LastError, want) || !st.Failing() || st.Retries < 4 || st.SentReadings != 0 || st.PendingReadings != 1 || st.NextAttempt == nil {
		t.Errorf("status %+v: want last_error with %q, retries, the reading pending and the next attempt", st, want)
	}
	if l := cairn.out.Matching(want); len(l) == 0 || !strings.Contains(l[0], "level=WARN") {
		t.Errorf("log lines with %q: %q, want a warning", want, l)
	}
	if got := sink.received(); got != 0 {
		t.Errorf("the reader got %d readings from a device the hub refused", got)
	}
}

// TestMQTTUplink_AzureRenewsMidBatch sends one batch of 200 readings as
// messages of 1 KiB at most, at 1 KiB/s, so that it takes about 14 s,
// with tokens that live 5 s: cairn renews the token between two messages
// of the batch, after the PUBACKs of those sent, at least twice, and the
// hub never has to close its connection; every reading arrives once.
func TestMQTTUplink_AzureRenewsMidBatch(t *testing.T) {
	bin := cairnBinary.get(t)
	hub := startAzureHub(t, testDeviceKey)
	sink := hub.subscribe(t)
	dir := t.TempDir()
	keyFile := writeFile(t, t.TempDir(), "device.key", []byte(testDeviceKey+"\n"), 0o600)
	cairn := startCairn(t, bin, writeConfig(t, dir, hub.azureConfig(keyFile, "5s", "    max_message_bytes: 1KiB\n    max_bytes_per_second: 1KiB\n")))
	api := newAPIClient(cairn.http)
	pub := mustConnect(t, cairn.mqtt, "sensor")
	const n = 200
	fields := make([]string, n)
	for i := range fields {
		fields[i] = fmt.Sprintf(`"m%03d":%d`, i, i)
	}
	if err := publish1(pub, "sensors/kitchen/telemetry", "{"+strings.Join(fields, ",")+"}"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "every reading at the reader", func() (bool, string) {
		tokens, refused, _, expired := hub.state()
		return sink.received() >= n, fmt.Sprintf("%d of %d; tokens %d, refused %q, expired %d; status %+v", sink.received(), n, tokens, refused, expired, uplinkStatuses(t, api)["hub"])
	})
	sink.check(t, n)
	tokens, refused, _, expired := hub.state()
	st := uplinkStatuses(t, api)["hub"]
	t.Logf("%d readings in %d batches, on %d tokens", st.SentReadings, st.SentBatches, tokens)
	if tokens < 3 || expired != 0 || len(refused) != 0 {
		t.Errorf("the device connected with %d tokens, the hub closed %d connections as their token expired and refused %q; want 3 tokens or more, renewed in time", tokens, expired, refused)
	}
	if st.SentBatches > 2 || st.LastError != "" || st.Retries != 0 || st.Refused != 0 {
		t.Errorf("status %+v: want the readings in one batch or two, no error, retry or refusal", st)
	}
}
