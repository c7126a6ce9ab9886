package main

import (
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// externalState is the part of /v1/status these tests read.
type externalState struct {
	MQTT struct {
		Connected      bool       `json:"connected"`
		LastError      string     `json:"last_error"`
		LastErrorAt    *time.Time `json:"last_error_at"`
		FailedAttempts int        `json:"failed_attempts"`
	} `json:"mqtt"`
}

// checkBrokerError runs cairn, external broker at url, against a broker
// that is down or refuses it, then calls fix and checks: READY=1 is sent
// before anything connects; the log names reason (once, however many
// attempts fail meanwhile), and so do /v1/status, cairn status and the
// dashboard; after fix (if not nil), cairn connects and the error is
// gone.
func checkBrokerError(t *testing.T, url, mqttKeys, reason string, fix func()) {
	t.Helper()
	bin := cairnBinary.get(t)
	sock := listenNotify(t)
	cfg := writeConfig(t, t.TempDir(), `
data_dir: %DATA%
mqtt:
  url: `+url+`
  client_id: cairn-errors
`+mqttKeys+`http:
  listen: "127.0.0.1:0"
`)
	p := startCairnEnv(t, bin, cfg, sock.env(0))
	sock.waitFor(t, "READY=1", startTimeout)
	api := newAPIClient(p.http)
	if st := statusAs[externalState](t, api); st.MQTT.Connected {
		t.Fatalf("connected to a broker that should not take cairn: %+v", st.MQTT)
	}
	const failing = "cannot connect to mqtt broker"
	line, err := p.out.WaitLine(failing, p.Exited(), startTimeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.out)
	}
	if !strings.Contains(line, reason) {
		t.Errorf("log line %q does not say %q", line, reason)
	}
	// Attempts go on every couple of seconds; the log says it once.
	var st externalState
	waitUntil(t, startTimeout, "three failed attempts in the status", func() (bool, string) {
		st = statusAs[externalState](t, api)
		return st.MQTT.FailedAttempts >= 3, fmt.Sprintf("%+v", st.MQTT)
	})
	if !strings.Contains(st.MQTT.LastError, reason) || st.MQTT.LastErrorAt == nil || time.Since(*st.MQTT.LastErrorAt) > time.Minute {
		t.Errorf("/v1/status mqtt: %+v, want last_error with %q and a recent last_error_at", st.MQTT, reason)
	}
	if n := len(p.out.Matching(failing)); n != 1 {
		t.Errorf("%d failed attempts logged %d lines, want 1:\n%s", st.MQTT.FailedAttempts, n, p.out)
	}
	out, err := exec.Command(bin, "status", "-sample", "0", "-url", p.http).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "last error ") || !strings.Contains(string(out), reason) {
		t.Errorf("cairn status: %v, want the last error with %q:\n%s", err, reason, out)
	}
	if code, body, err := api.fetch("/readyz"); err != nil || code != 503 || !strings.Contains(string(body), reason) {
		t.Errorf("/readyz: %d %v, want 503 with %q:\n%s", code, err, reason, body)
	}
	code, page, err := api.fetch("/?part=health")
	if err != nil || code != 200 || !strings.Contains(string(page), "Last error") || !strings.Contains(string(page), html.EscapeString(reason)) {
		t.Errorf("dashboard health: %d %v, want the last error with %q:\n%s", code, err, reason, page)
	}

	if fix == nil {
		if err := p.signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
		}
		return
	}
	fix()
	waitUntil(t, startTimeout, "cairn to connect once the broker is fixed", func() (bool, string) {
		st = statusAs[externalState](t, api)
		return st.MQTT.Connected, fmt.Sprintf("%+v", st.MQTT)
	})
	if st.MQTT.LastError != "" || st.MQTT.LastErrorAt != nil || st.MQTT.FailedAttempts != 0 {
		t.Errorf("connected, the error stays: %+v", st.MQTT)
	}
	if line, err := p.out.WaitLine("connected to mqtt broker", p.Exited(), time.Second); err != nil || !strings.Contains(line, "failed_attempts=") {
		t.Errorf("no connection logged with the attempts that failed: %q %v", line, err)
	}
	out, err = exec.Command(bin, "status", "-sample", "0", "-url", p.http).CombinedOutput()
	if err != nil || strings.Contains(string(out), "last error") || !strings.Contains(string(out), "external broker "+url+", connected") {
		t.Errorf("cairn status once connected: %v\n%s", err, out)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
}

// TestRun_ExternalBrokerDown runs cairn against a port where nothing
// listens, then starts Mosquitto there.
func TestRun_ExternalBrokerDown(t *testing.T) {
	broker := startMosquitto(t)
	broker.stop(t)
	checkBrokerError(t, "tcp://"+broker.addr(), "", "connection refused", func() { broker.start(t) })
}

// TestRun_ExternalBrokerNameUnknown runs cairn against a broker whose
// name does not resolve (.invalid never does, RFC 6761).
func TestRun_ExternalBrokerNameUnknown(t *testing.T) {
	checkBrokerError(t, "tcp://cairn-broker.invalid:1883", "", "DNS: lookup cairn-broker.invalid", nil)
}

// TestRun_ExternalBrokerRefusesCredentials runs cairn against Mosquitto
// with a password file that has another password for cairn's user, then
// sets cairn's password there and has Mosquitto reload it.
func TestRun_ExternalBrokerRefusesCredentials(t *testing.T) {
	broker, passwd := startMosquittoAuth(t, "cairn", "not-what-cairn-has", "")
	pass := writeFile(t, t.TempDir(), "mqtt-pass", []byte("what-cairn-has\n"), 0o600)
	keys := "  username: cairn\n  password_file: " + pass + "\n"
	checkBrokerError(t, "tcp://"+broker.addr(), keys, "not authorised: the broker refused cairn's credentials, CONNACK return code 5", func() {
		mosquittoPasswd(t, passwd, "cairn", "what-cairn-has")
		if err := broker.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil { // reloads the password file
			t.Fatal(err)
		}
	})
}

// startMosquittoAuth starts Mosquitto on a free port of 127.0.0.1 that
// lets in only user with password, from the password file it returns;
// listener holds more lines for its listener (TLS), or is "".
func startMosquittoAuth(t *testing.T, user, password, listener string) (*mosquitto, string) {
	t.Helper()
	bin := mosquittoBin(t)
	me, err := currentUser()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	mosquittoPasswd(t, pw, user, password)
	m := &mosquitto{bin: bin, conf: filepath.Join(dir, "mosquitto.conf"), port: freePort(t)}
	conf := fmt.Sprintf(`per_listener_settings false
allow_anonymous false
password_file %s
user %s
listener %d 127.0.0.1
%slog_dest stderr
log_type error
log_type warning
`, pw, me, m.port, listener)
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(t)
	return m, pw
}

// mosquittoPasswd sets user's password in Mosquitto's password file pw,
// creating it if missing.
func mosquittoPasswd(t *testing.T, pw, user, password string) {
	t.Helper()
	bin, err := exec.LookPath("mosquitto_passwd")
	if err != nil {
		t.Fatalf("this test needs mosquitto_passwd (%v): apt-get install mosquitto", err)
	}
	args := []string{"-b", pw, user, password}
	if _, err := os.Stat(pw); os.IsNotExist(err) {
		args = append([]string{"-c"}, args...)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
	}
}
