package main

import (
	"fmt"
	"os/user"
	"runtime"
	"strings"
	"testing"
	"time"
)

// startMosquittoTLS starts Mosquitto with one TLS listener that requires a
// client certificate signed by ca and a user name and password.
func startMosquittoTLS(t *testing.T, ca *testCA, user, password string) *mosquitto {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.issue(t, "broker", true)
	m, _ := startMosquittoAuth(t, user, password, fmt.Sprintf(`cafile %s
certfile %s
keyfile %s
require_certificate true
tls_version tlsv1.2
`, writeFile(t, dir, "ca.pem", ca.pem, 0o644), writeFile(t, dir, "broker.pem", cert, 0o644), writeFile(t, dir, "broker.key", key, 0o600)))
	return m
}

func currentUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

// TestRun_ExternalMosquittoTLS subscribes to Mosquitto over TLS with a
// client certificate and a password from a file; a gateway that does not
// trust the broker's CA, or has the wrong password, never connects.
func TestRun_ExternalMosquittoTLS(t *testing.T) {
	ca, other := newTestCA(t, "broker CA"), newTestCA(t, "someone else")
	mq := startMosquittoTLS(t, ca, "cairn", "broker-pass")
	dir := t.TempDir()
	cert, key := ca.issue(t, "cairn", false)
	certFile, keyFile := writeFile(t, dir, "cairn.pem", cert, 0o644), writeFile(t, dir, "cairn.key", key, 0o600)
	caFile, otherCA := writeFile(t, dir, "ca.pem", ca.pem, 0o644), writeFile(t, dir, "other.pem", other.pem, 0o644)
	good := writeFile(t, dir, "mqtt-pass", []byte("broker-pass\n"), 0o600)
	bad := writeFile(t, dir, "mqtt-pass-wrong", []byte("nope\n"), 0o600)
	config := func(ca, passwordFile, clientID string) string {
		return writeConfig(t, t.TempDir(), fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  url: ssl://127.0.0.1:%d
  client_id: %s
  username: cairn
  password_file: %s
  tls:
    ca_file: %s
    cert_file: %s
    key_file: %s
http:
  listen: "127.0.0.1:0"
`, mq.port, clientID, passwordFile, ca, certFile, keyFile))
	}

	// Not trusting the broker's certificate, or a wrong password: no
	// connection in 3 seconds.
	for _, c := range []struct{ name, ca, pass, reason string }{
		{"unknown CA", otherCA, good, "TLS: tls: failed to verify certificate"},
		{"wrong password", caFile, bad, "not authorised"},
	} {
		d := startDaemon(t, config(c.ca, c.pass, "cairn-"+strings.ReplaceAll(c.name, " ", "-")))
		api := newAPIClient(d.http)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if api.status(t).MQTT.Connected {
				t.Errorf("%s: connected to the broker", c.name)
				break
			}
		}
		if st := statusAs[externalState](t, api); !strings.HasPrefix(st.MQTT.LastError, c.reason) {
			t.Errorf("%s: mqtt.last_error %q, want it to begin %q", c.name, st.MQTT.LastError, c.reason)
		}
		if err := d.stop(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// paho's connect retry loop outlives Disconnect by up to its retry
	// interval (2 s); wait for it, or goleak reports it.
	waitUntil(t, startTimeout, "paho's connect retries to end", func() (bool, string) {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(stacks, "paho%2emqtt%2egolang.(*client).Connect.func1") &&
			!strings.Contains(stacks, "paho.mqtt.golang.(*client).Connect.func1"), "still retrying"
	})

	d := startDaemon(t, config(caFile, good, "cairn-good"))
	api := newAPIClient(d.http)
	waitUntil(t, startTimeout, "cairn to connect over TLS", func() (bool, string) {
		return api.status(t).MQTT.Connected, "not connected"
	})
	pub, err := connectAs(mq.addr(), "sensor", mqttLogin{user: "cairn", password: "broker-pass", tls: clientTLS(t, ca, cert, key)})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(100)
	if err := publish1(pub, "sensors/porch/telemetry", `{"t":3.5}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, startTimeout, "the reading via Mosquitto over TLS", func() (bool, string) {
		var rd readingsDoc
		code := api.get(t, "/v1/devices/porch/readings", &rd)
		return code == 200 && len(rd.Readings) == 1, fmt.Sprint(code, rd.Readings)
	})
}
