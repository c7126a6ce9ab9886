package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// addUser runs cairn passwd -file file user with the password on stdin.
func addUser(t *testing.T, file, user, password string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, password+"\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer r.Close()
	var out bytes.Buffer
	if err := runPasswd([]string{"-file", file, user}, r, &out, io.Discard); err != nil {
		t.Fatalf("cairn passwd %s: %v", user, err)
	}
}

// mqttLogin is how a test client connects.
type mqttLogin struct {
	user, password string
	tls            *tls.Config
	will           string // a will topic, if set
}

// connectAs connects a clean-session client as login to addr; with TLS
// when login.tls is set.
func connectAs(addr, clientID string, login mqttLogin) (paho.Client, error) {
	scheme := "tcp://"
	if login.tls != nil {
		scheme = "ssl://"
	}
	opts := testkit.PublisherOptions(scheme+addr, clientID, 5*time.Second)
	if login.user != "" {
		opts.SetUsername(login.user).SetPassword(login.password)
	}
	if login.tls != nil {
		opts.SetTLSConfig(login.tls)
	}
	if login.will != "" {
		opts.SetWill(login.will, `{"t":66}`, 1, true)
	}
	return testkit.Connect(opts, startTimeout)
}

// refusedDoc is the part of /v1/status about refusals.
type refusedDoc struct {
	MQTT struct {
		Refused         uint64            `json:"refused"`
		RefusedByReason map[string]uint64 `json:"refused_by_reason"`
	} `json:"mqtt"`
	Ingest struct {
		Messages uint64 `json:"messages"`
	} `json:"ingest"`
}

// waitRefused waits until the status counts want refusals of reason.
func waitRefused(t *testing.T, api *apiClient, reason string, want uint64) {
	t.Helper()
	waitUntil(t, startTimeout, reason+" refusals", func() (bool, string) {
		st := statusAs[refusedDoc](t, api)
		return st.MQTT.RefusedByReason[reason] >= want, fmt.Sprint(st.MQTT.RefusedByReason)
	})
}

const authConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
    password_file: %PASSWD%
    acl_file: %ACL%
    allow_anonymous: false
http:
  listen: "127.0.0.1:0"
`

// TestRun_BrokerAuth tries every way in that must fail, beside ones that
// must work: each refusal is counted by its reason and nothing refused is
// stored.
func TestRun_BrokerAuth(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	addUser(t, passwd, "kitchen", "kitchen-secret")
	addUser(t, passwd, "garage", "garage-secret")
	addUser(t, passwd, "dashboard", "dash-secret")
	addUser(t, passwd, "kitchen", "kitchen-secret-2") // changed
	if fi, err := os.Stat(passwd); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	acl := writeFile(t, dir, "acl", []byte("# dashboards read everything\nuser dashboard\nread sensors/#\n"), 0o644)
	cfg := strings.NewReplacer("%PASSWD%", passwd, "%ACL%", acl).Replace(authConfig)
	d := startDaemon(t, writeConfig(t, data, cfg))
	api := newAPIClient(d.http)

	// Refused at CONNECT.
	for _, c := range []struct {
		name   string
		login  mqttLogin
		reason string
	}{
		{"no credentials", mqttLogin{}, gateway.RefuseNoCredentials},
		{"wrong password", mqttLogin{user: "kitchen", password: "nope"}, gateway.RefuseBadPassword},
		{"old password", mqttLogin{user: "kitchen", password: "kitchen-secret"}, gateway.RefuseBadPassword},
		{"empty password", mqttLogin{user: "kitchen"}, gateway.RefuseBadPassword},
		{"unknown user", mqttLogin{user: "attic", password: "kitchen-secret-2"}, gateway.RefuseUnknownUser},
	} {
		cl, err := connectAs(d.mqtt, "intruder", c.login)
		if err == nil {
			cl.Disconnect(0)
			t.Errorf("%s: connected, want refused (%s)", c.name, c.reason)
		}
	}
	waitRefused(t, api, gateway.RefuseNoCredentials, 1)
	waitRefused(t, api, gateway.RefuseBadPassword, 3)
	waitRefused(t, api, gateway.RefuseUnknownUser, 1)

	kitchen, err := connectAs(d.mqtt, "kitchen-1", mqttLogin{user: "kitchen", password: "kitchen-secret-2"})
	if err != nil {
		t.Fatalf("kitchen with its password: %v", err)
	}
	defer kitchen.Disconnect(100)
	if err := publish1(kitchen, "sensors/kitchen/telemetry", `{"t":21.5}`); err != nil {
		t.Fatalf("kitchen publishing as itself: %v", err)
	}

	// Another user cannot take the kitchen's session over with its client
	// id; nor can the kitchen leave a will on another device's topic.
	garage, err := connectAs(d.mqtt, "kitchen-1", mqttLogin{user: "garage", password: "garage-secret"})
	if err != nil {
		t.Fatalf("garage: %v", err)
	}
	garage.Disconnect(100)
	if err := publish1(kitchen, "sensors/kitchen/telemetry", `{"t":21.6}`); err != nil {
		t.Fatalf("the kitchen after a client of another user connected with its client id: %v", err)
	}
	if cl, err := connectAs(d.mqtt, "kitchen-will", mqttLogin{user: "kitchen", password: "kitchen-secret-2", will: "sensors/garage/telemetry"}); err == nil {
		cl.Disconnect(0)
		t.Error("a will on another device's topic: connected, want refused")
	}
	waitRefused(t, api, gateway.RefuseOtherDevice, 1)
	base := statusAs[refusedDoc](t, api).MQTT.RefusedByReason[gateway.RefuseOtherDevice] // 1, or 2 when paho tried MQTT 3.1 too

	// Subscriptions beyond the ACL get a failure code; its own are granted.
	subscribe := func(c paho.Client, filter string) byte {
		t.Helper()
		tok := c.Subscribe(filter, 1, func(paho.Client, paho.Message) {})
		if !tok.WaitTimeout(ackTimeout) {
			t.Fatalf("subscribe %s: no SUBACK", filter)
		}
		return tok.(*paho.SubscribeToken).Result()[filter]
	}
	for _, f := range []string{"sensors/#", "sensors/+/telemetry", "sensors/garage/telemetry", "#", "$SYS/#"} {
		if code := subscribe(kitchen, f); code != 0x80 {
			t.Errorf("kitchen subscribing to %s: granted QoS %d, want failure 0x80", f, code)
		}
	}
	waitRefused(t, api, gateway.RefuseSubscribe, 5)
	if code := subscribe(kitchen, "sensors/kitchen/telemetry"); code != 1 {
		t.Errorf("kitchen subscribing to its own topic: code %#x, want QoS 1", code)
	}
	dash, err := connectAs(d.mqtt, "dash", mqttLogin{user: "dashboard", password: "dash-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer dash.Disconnect(100)
	if code := subscribe(dash, "sensors/#"); code != 1 {
		t.Errorf("dashboard subscribing to sensors/# (ACL file): code %#x, want QoS 1", code)
	}
	if code := subscribe(dash, "other/#"); code != 0x80 {
		t.Errorf("dashboard subscribing to other/#: code %#x, want 0x80", code)
	}

	// Publishing as another device: QoS 0 is dropped, QoS 1 costs the
	// connection (MQTT 3.1.1 has no negative PUBACK).
	if tok := kitchen.Publish("sensors/garage/telemetry", 0, false, `{"t":99}`); !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
		t.Fatalf("QoS 0 publish: %v", tok.Error())
	}
	waitRefused(t, api, gateway.RefuseOtherDevice, base+1)
	if err := publish1(dash, "sensors/dashboard/telemetry", `{"t":1}`); err != nil {
		t.Errorf("dashboard publishing as itself: %v", err)
	}
	deep := "sensors/kitchen/telemetry" + strings.Repeat("/x", gateway.MaxTopicLevels)
	kitchen.Publish(deep, 0, false, "1").WaitTimeout(ackTimeout)
	waitRefused(t, api, gateway.RefuseTopicTooDeep, 1)
	kitchen.Publish("elsewhere/kitchen", 0, false, "1").WaitTimeout(ackTimeout)
	waitRefused(t, api, gateway.RefusePublish, 1)
	tok := kitchen.Publish("sensors/garage/telemetry", 1, false, `{"t":98}`)
	tok.WaitTimeout(5 * time.Second)
	waitUntil(t, startTimeout, "the kitchen to be disconnected", func() (bool, string) {
		return !kitchen.IsConnectionOpen(), "still connected"
	})
	waitRefused(t, api, gateway.RefuseOtherDevice, base+2)

	// Nothing refused is stored: the kitchen's and the dashboard's own
	// readings only.
	var devs struct {
		Devices []struct{ Device string } `json:"devices"`
	}
	api.get(t, "/v1/devices", &devs)
	var got []string
	for _, dv := range devs.Devices {
		got = append(got, dv.Device)
	}
	if strings.Join(got, ",") != "dashboard,kitchen" {
		t.Errorf("devices stored: %v, want [dashboard kitchen]", got)
	}
	var rd readingsDoc
	api.get(t, "/v1/devices/kitchen/readings", &rd)
	if len(rd.Readings) != 2 {
		t.Errorf("kitchen readings: %+v, want the two it published", rd.Readings)
	}
	st := statusAs[refusedDoc](t, api)
	t.Logf("refused: %d %v", st.MQTT.Refused, st.MQTT.RefusedByReason)

	// The refusals reach the metrics too.
	_, body, err := api.fetch("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(fmt.Sprintf(`cairn_mqtt_refused_total{reason="publish_other_device"} %d`, base+2))) {
		t.Errorf("metrics lack cairn_mqtt_refused_total for publish_other_device:\n%s", grepLines(body, "refused"))
	}
}

func grepLines(b []byte, substr string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRun_AnonymousOnLoopbackOnly: the first-run config lets anonymous
// clients in on loopback; a listener off loopback without users is a
// configuration error, and allow_anonymous: true warns at start.
func TestRun_AnonymousOnLoopbackOnly(t *testing.T) {
	d := startDaemon(t, writeConfig(t, t.TempDir(), embeddedConfig))
	c := mustConnect(t, d.mqtt, "anon")
	if err := publish1(c, "sensors/anon/telemetry", `{"t":1}`); err != nil {
		t.Fatal(err)
	}
	// Without a password file, a user name is not checked there either.
	named, err := connectAs(d.mqtt, "named", mqttLogin{user: "kitchen", password: "anything"})
	if err != nil {
		t.Fatalf("a user name on loopback without a password file: %v", err)
	}
	named.Disconnect(100)

	_, err = ParseConfig(strings.NewReader("mqtt:\n  embedded:\n    listen: \"0.0.0.0:1883\"\n"))
	if err == nil || !strings.Contains(err.Error(), "mqtt.embedded.listen: 0.0.0.0:1883 is not loopback") {
		t.Errorf("listen on 0.0.0.0 without users: got %v, want a configuration error", err)
	}
	warn := startDaemon(t, writeConfig(t, t.TempDir(), `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "0.0.0.0:0"
    allow_anonymous: true
http:
  listen: "127.0.0.1:0"
`))
	if _, err := warn.log.WaitLine("allow_anonymous is true", warn.done, startTimeout); err != nil {
		t.Errorf("no warning about anonymous access: %v\n%s", err, warn.log)
	}
}

// TestRun_TLSListener serves MQTT over TLS with client certificates from
// a CA made here: a good certificate is served, its common name is the
// user; no certificate, an expired one, one from another CA, and a user
// name that is not the common name are refused.
func TestRun_TLSListener(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	ca, other := newTestCA(t, "cairn test CA"), newTestCA(t, "someone else")
	now := time.Now()
	srvCert, srvKey := ca.issue(t, "gateway", true)
	goodCert, goodKey := ca.issue(t, "kitchen", false)
	oldCert, oldKey := ca.issueFor(t, "kitchen", false, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	alienCert, alienKey := other.issue(t, "kitchen", false)
	cfg := fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
    tls_listen: "127.0.0.1:0"
    tls:
      cert_file: %s
      key_file: %s
      client_ca_file: %s
http:
  listen: "127.0.0.1:0"
`, writeFile(t, dir, "server.pem", srvCert, 0o644), writeFile(t, dir, "server.key", srvKey, 0o600), writeFile(t, dir, "ca.pem", ca.pem, 0o644))
	d := startDaemon(t, writeConfig(t, data, cfg))
	line, err := d.log.WaitLine("mqtt tls listener", d.done, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	addr := line[strings.Index(line, "mqtt_tls=")+len("mqtt_tls="):]
	addr = strings.Fields(addr)[0]
	api := newAPIClient(d.http)

	for _, c := range []struct {
		name string
		tls  *tls.Config
	}{
		{"no certificate", clientTLS(t, ca, nil, nil)},
		{"expired certificate", clientTLS(t, ca, oldCert, oldKey)},
		{"certificate of another CA", clientTLS(t, ca, alienCert, alienKey)},
	} {
		if cl, err := connectAs(addr, "tls-"+c.name, mqttLogin{tls: c.tls}); err == nil {
			cl.Disconnect(0)
			t.Errorf("%s: connected, want refused", c.name)
		}
	}
	waitRefused(t, api, gateway.RefuseBadCertificate, 3)
	if cl, err := connectAs(addr, "tls-mismatch", mqttLogin{user: "garage", tls: clientTLS(t, ca, goodCert, goodKey)}); err == nil {
		cl.Disconnect(0)
		t.Error("user name other than the certificate's: connected, want refused")
	}
	waitRefused(t, api, gateway.RefuseCertUser, 1)
	// TLS below 1.2 is refused.
	old := clientTLS(t, ca, goodCert, goodKey)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if cl, err := connectAs(addr, "tls-old", mqttLogin{tls: old}); err == nil {
		cl.Disconnect(0)
		t.Error("TLS 1.1: connected, want refused")
	}

	good, err := connectAs(addr, "tls-good", mqttLogin{tls: clientTLS(t, ca, goodCert, goodKey)})
	if err != nil {
		t.Fatalf("good certificate: %v", err)
	}
	defer good.Disconnect(100)
	if err := publish1(good, "sensors/kitchen/telemetry", `{"t":21.5}`); err != nil {
		t.Fatal(err)
	}
	good.Publish("sensors/garage/telemetry", 0, false, `{"t":1}`).WaitTimeout(ackTimeout)
	waitRefused(t, api, gateway.RefuseOtherDevice, 1)
	var rd readingsDoc
	if code := api.get(t, "/v1/devices/kitchen/readings", &rd); code != http.StatusOK || len(rd.Readings) != 1 {
		t.Errorf("kitchen over TLS: %d, %+v; want its one reading", code, rd.Readings)
	}
	if code := api.get(t, "/v1/devices/garage/readings", nil); code != http.StatusNotFound {
		t.Errorf("garage: %d, want 404 (nothing stored)", code)
	}
}

// TestRun_SecretFileModes runs the cairn binary with secret files that
// group or others can read: it must not start, and must name the file and
// the fix, with the configuration exit status.
func TestRun_SecretFileModes(t *testing.T) {
	bin := cairnBinary.get(t)
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	addUser(t, passwd, "kitchen", "secret")
	token := writeFile(t, dir, "token", []byte("let-me-in-let-me-in\n"), 0o644)
	for _, c := range []struct{ name, yaml, file string }{
		{"password file", "mqtt:\n  embedded:\n    listen: \"127.0.0.1:0\"\n    password_file: " + passwd + "\nhttp:\n  listen: \"127.0.0.1:0\"\n", passwd},
		{"http token", "mqtt:\n  embedded:\n    listen: \"127.0.0.1:0\"\nhttp:\n  listen: \"127.0.0.1:0\"\n  token_file: " + token + "\n", token},
	} {
		if err := os.Chmod(c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := writeConfig(t, t.TempDir(), "data_dir: "+t.TempDir()+"\n"+c.yaml)
		cmd := exec.Command(bin, "run", "-config", cfg)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
			t.Errorf("%s readable by others: exit %v, want status %d\n%s", c.name, err, exitConfig, out)
		}
		if want := "readable by group or others (mode 0644); run: chmod 600 " + c.file; !strings.Contains(string(out), want) {
			t.Errorf("%s: output %q does not contain %q", c.name, out, want)
		}
	}
}

// TestRun_HTTPGuard: a bearer token guards every endpoint but /healthz;
// no debug endpoints; oversized and too frequent queries are refused.
func TestRun_HTTPGuard(t *testing.T) {
	token := writeFile(t, t.TempDir(), "token", []byte("s3cret-token-0123\n"), 0o600)
	d := startDaemon(t, writeConfig(t, t.TempDir(), localConfig+`  token_file: `+token+`
  query_rate: 2
`))
	do := func(path, tok string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+d.http+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
		resp.Body.Close()
		return resp.StatusCode
	}
	const good = "s3cret-token-0123"
	for _, c := range []struct {
		path, tok string
		want      int
	}{
		{"/healthz", "", 200},
		{"/readyz", "", 401},
		{"/v1/status", "", 401},
		{"/v1/status", "wrong", 401},
		{"/metrics", "", 401},
		{"/v1/devices", "", 401},
		{"/v1/status", good, 200},
		{"/metrics", good, 200},
		{"/debug/pprof/", good, 404},
		{"/debug/vars", good, 404},
		{"/v1/devices?x=" + strings.Repeat("a", 3000), good, 413},
	} {
		if got := do(c.path, c.tok); got != c.want {
			t.Errorf("GET %.60s with token %q: %d, want %d", c.path, c.tok, got, c.want)
		}
	}
	// query_rate 2: a burst of queries meets 429s.
	limited := 0
	for range 10 {
		if do("/v1/devices", good) == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 5 {
		t.Errorf("10 queries at once with query_rate 2: %d refused, want at least 5", limited)
	}
	// cairn status sends the token of the configuration.
	var out bytes.Buffer
	cfg := writeConfig(t, t.TempDir(), "http:\n  listen: \""+d.http+"\"\n  token_file: "+token+"\n")
	if err := runStatus([]string{"-config", cfg}, &out, io.Discard); err != nil {
		t.Errorf("cairn status with the token: %v", err)
	}
}

const limitsConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
    password_file: %PASSWD%
    limits:
      %LIMIT%
http:
  listen: "127.0.0.1:0"
store:
  commit_wait: %WAIT%
`

// TestRun_BrokerLimits: a client over the message rate is slowed down,
// loses nothing, and is logged once; a client with more QoS 1 messages
// in flight than max_inflight is disconnected; a connection that sends no
// CONNECT is closed after 10 s. Each is counted.
func TestRun_BrokerLimits(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	addUser(t, passwd, "kitchen", "pass")
	startWith := func(limit, wait string) (*inProcess, *apiClient) {
		d := startDaemon(t, writeConfig(t, t.TempDir(), strings.NewReplacer("%PASSWD%", passwd, "%LIMIT%", limit, "%WAIT%", wait).Replace(limitsConfig)))
		return d, newAPIClient(d.http)
	}
	d, api := startWith("max_inflight: 5", "5s")

	// A connection that never sends its CONNECT is closed after 10 s.
	idle, err := net.Dial("tcp", d.mqtt)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idleClosed := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		idle.SetReadDeadline(start.Add(ackTimeout)) //nolint:errcheck // then the read fails with a timeout
		if _, err := io.Copy(io.Discard, idle); err != nil {
			idleClosed <- -1 // our deadline, not the broker's close
			return
		}
		idleClosed <- time.Since(start)
	}()

	// 5 in flight at most: 20 at once, while their commit waits for
	// another client that has just sent (commit_wait 5s).
	other, err := connectAs(d.mqtt, "other", mqttLogin{user: "kitchen", password: "pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Disconnect(0)
	if tok := other.Publish("sensors/kitchen/telemetry", 1, false, `{"t":-1}`); !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
		t.Fatalf("the other client's message: %v", tok.Error())
	}
	conn, err := net.Dial("tcp", d.mqtt)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ackTimeout)) //nolint:errcheck // a failed read below says it
	if _, err := conn.Write(rawConnect("burst", "kitchen", "pass")); err != nil {
		t.Fatal(err)
	}
	connack := make([]byte, 4)
	if _, err := io.ReadFull(conn, connack); err != nil || connack[3] != 0 {
		t.Fatalf("CONNACK %x, %v", connack, err)
	}
	var burst []byte
	for i := range 20 {
		burst = append(burst, rawPublish("sensors/kitchen/telemetry", 1, uint16(i+1), fmt.Sprintf(`{"t":%d}`, i))...)
	}
	if _, err := conn.Write(burst); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the broker did not close the connection: %v", err)
	}
	waitRefused(t, api, gateway.RefuseInflight, 1)

	// 60 messages at 20 a second, a burst of 20: at least 2 seconds.
	first := api
	d, api = startWith("message_rate: 20", "0s")
	c, err := connectAs(d.mqtt, "fast", mqttLogin{user: "kitchen", password: "pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(100)
	start := time.Now()
	toks := make([]paho.Token, 60)
	for i := range toks {
		toks[i] = c.Publish("sensors/kitchen/telemetry", 1, false, fmt.Sprintf(`{"t":%d}`, 1000+i))
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
			t.Fatalf("message %d: no PUBACK: %v", i, tok.Error())
		}
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("60 messages at message_rate 20 took %s, want 2s or more", el)
	}
	waitRefused(t, api, gateway.RefuseRateLimited, 30)
	var rd readingsDoc
	api.get(t, "/v1/devices/kitchen/readings?limit=1000", &rd)
	if len(rd.Readings) != 60 {
		t.Errorf("%d readings stored, want all 60", len(rd.Readings))
	}
	if n := strings.Count(d.log.String(), "reason=rate_limited client=kitchen/fast"); n != 1 {
		t.Errorf("rate limit logged %d times for the client, want once a minute\n%s", n, d.log)
	}

	if el := <-idleClosed; el < 5*time.Second || el > 20*time.Second {
		t.Errorf("a connection without CONNECT was closed after %v, want about 10s", el)
	}
	waitRefused(t, first, gateway.RefuseConnectTimeout, 1)
}
