package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runSimProcess runs `cairn sim args...` to its end and returns its
// output and the summary on its last line; it fails the test if sim does
// not exit in time. err is how sim exited.
func runSimProcess(t *testing.T, args ...string) (out string, sum simSummary, err error) {
	t.Helper()
	p := startProcess(t, cairnBinary.get(t), append([]string{"sim"}, args...)...)
	select {
	case <-p.Exited():
	case <-time.After(startTimeout):
		t.Fatalf("cairn sim still running after %s; output:\n%s", startTimeout, p.out)
	}
	out = p.out.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); jerr != nil && p.Err() == nil {
		t.Fatalf("cairn sim's summary: %v\n%s", jerr, out)
	}
	return out, sum, p.Err()
}

// checkSimRun fails the test unless sim published and had acknowledged
// n messages, printed progress lines and its summary for people, and
// the gateway stored the readings as device.
func checkSimRun(t *testing.T, out string, sum simSummary, err error, n int64, api *apiClient, device string) {
	t.Helper()
	if err != nil || sum.Sent != n || sum.Acked != n {
		t.Fatalf("cairn sim: %v, %+v; want %d messages acknowledged\n%s", err, sum, n, out)
	}
	t.Logf("cairn sim:\n%s", out)
	progress := regexp.MustCompile(`(?m)^sim: [\d.]+m?s: \d+ published, \d+ acknowledged, \d+ acknowledged/s$`)
	if len(progress.FindAllString(out, -1)) < 2 {
		t.Errorf("cairn sim printed fewer than 2 progress lines:\n%s", out)
	}
	if want := fmt.Sprintf("published, %d acknowledged (%d readings)", n, 2*n); !strings.Contains(out, "sim: done in ") || !strings.Contains(out, want) {
		t.Errorf("cairn sim's summary for people lacks %q:\n%s", want, out)
	}
	var rd readingsDoc
	if code := api.get(t, "/v1/devices/"+device+"/readings?limit=1000", &rd); code != http.StatusOK || len(rd.Readings) != int(2*n) {
		t.Errorf("device %s: %d, %d readings; want %d", device, code, len(rd.Readings), 2*n)
	}
}

// TestSim_PasswordFile runs cairn sim with a user name and a password
// file against a cairn whose broker wants them, taking the broker's
// address from cairn's configuration: the readings are stored under the
// user's name. A wrong password is refused, and sim says so; so are
// several devices of one user, which no ACL line lets it write, and a
// client without a user.
func TestSim_PasswordFile(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	addUser(t, passwd, "kitchen", "kitchen-secret")
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  embedded:
    listen: "127.0.0.1:%d"
    password_file: %s
    allow_anonymous: false
http:
  listen: "127.0.0.1:0"
`, freePort(t), passwd))
	p := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(p.http)

	wrong := writeFile(t, dir, "wrong", []byte("not-the-secret\n"), 0o600)
	out, _, err := runSimProcess(t, "-config", cfg, "-username", "kitchen", "-password-file", wrong, "-count", "5")
	if err == nil || !strings.Contains(out, "sim: connect tcp://127.0.0.1:") || !strings.Contains(out, "not Authorized") {
		t.Errorf("cairn sim with a wrong password: %v, want it refused:\n%s", err, out)
	}

	out, _, err = runSimProcess(t, "-config", cfg, "-count", "5")
	if err == nil || !strings.Contains(out, "not Authorized (the broker wants a user: give -username and -password-file") {
		t.Errorf("cairn sim without a user: %v, want it refused, and a word about -username:\n%s", err, out)
	}

	secret := writeFile(t, dir, "secret", []byte("kitchen-secret\n"), 0o600)
	// Several devices of one user are kitchen-0000, …: without an ACL line
	// cairn closes the connection, and sim says why.
	out, _, err = runSimProcess(t, "-config", cfg, "-username", "kitchen", "-password-file", secret, "-devices", "2", "-count", "4")
	if err == nil || !strings.Contains(out, "the devices are kitchen-0000, …") || !strings.Contains(out, "use -devices 1, or open them in mqtt.embedded.acl_file") {
		t.Errorf("cairn sim -username kitchen -devices 2: %v, want the connection lost and why:\n%s", err, out)
	}

	out, sum, err := runSimProcess(t, "-config", cfg, "-username", "kitchen", "-password-file", secret,
		"-count", "60", "-rate", "100", "-progress", "100ms")
	if !strings.Contains(out, "as user kitchen; 1 device at 100 messages/s") {
		t.Errorf("cairn sim's first line does not say whom it connects as:\n%s", out)
	}
	checkSimRun(t, out, sum, err, 60, api, "kitchen")
}

// TestSim_TLS runs cairn sim against a cairn whose broker has only a TLS
// listener and wants client certificates: once with the broker and its
// certificate taken from cairn's configuration, once with -broker and
// -cafile; both with -cert and -key, as the certificate's user.
func TestSim_TLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cairn test CA")
	srvCert, srvKey := ca.issue(t, "gateway", true)
	cliCert, cliKey := ca.issue(t, "kitchen", false)
	port := freePort(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  embedded:
    listen: ""
    tls_listen: "127.0.0.1:%d"
    tls:
      cert_file: %s
      key_file: %s
      client_ca_file: %s
http:
  listen: "127.0.0.1:0"
`, port, writeFile(t, dir, "server.pem", srvCert, 0o644), writeFile(t, dir, "server.key", srvKey, 0o600), writeFile(t, dir, "ca.pem", ca.pem, 0o644)))
	p := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(p.http)
	cert, key := writeFile(t, dir, "kitchen.pem", cliCert, 0o644), writeFile(t, dir, "kitchen.key", cliKey, 0o600)

	out, sum, err := runSimProcess(t, "-config", cfg, "-username", "kitchen", "-cert", cert, "-key", key,
		"-count", "30", "-rate", "100", "-progress", "100ms")
	if !strings.Contains(out, fmt.Sprintf("sim: connected to ssl://127.0.0.1:%d as user kitchen", port)) {
		t.Errorf("cairn sim did not take the TLS listener from the configuration:\n%s", out)
	}
	checkSimRun(t, out, sum, err, 30, api, "kitchen")

	out, sum, err = runSimProcess(t, "-broker", fmt.Sprintf("ssl://127.0.0.1:%d", port), "-cafile", filepath.Join(dir, "ca.pem"),
		"-username", "kitchen", "-cert", cert, "-key", key, "-count", "30", "-rate", "100", "-progress", "100ms", "-client-id", "sim-2")
	if err != nil || sum.Acked != 30 {
		t.Errorf("cairn sim with -broker and -cafile: %v, %+v\n%s", err, sum, out)
	}

	out, _, err = runSimProcess(t, "-config", cfg, "-username", "kitchen", "-count", "5")
	if err == nil {
		t.Errorf("cairn sim without a client certificate connected to a broker that wants one:\n%s", out)
	}
}

// TestSimBrokerFromConfig reads the broker's address from
// configurations: every interface is reached on loopback, a port picked
// at start cannot be, an external broker is its URL; the password file
// the configuration names is not read (here it does not exist).
func TestSimBrokerFromConfig(t *testing.T) {
	dir := t.TempDir()
	srvCert, _ := newTestCA(t, "ca").issue(t, "gateway", true)
	cert := writeFile(t, dir, "server.pem", srvCert, 0o644)
	for _, tc := range []struct {
		name, mqtt string
		want, err  string
		tls        bool
	}{
		{"every interface", "  embedded:\n    listen: \"0.0.0.0:1884\"\n    allow_anonymous: true\n", "tcp://127.0.0.1:1884", "", false},
		{"a host", "  embedded:\n    listen: \"192.0.2.7:1883\"\n    password_file: /nonexistent/passwd\n", "tcp://192.0.2.7:1883", "", false},
		{"port 0", "  embedded:\n    listen: \"127.0.0.1:0\"\n", "", "mqtt.embedded.listen 127.0.0.1:0: the port is picked at each start; give -broker", false},
		{"TLS only", "  embedded:\n    listen: \"\"\n    allow_anonymous: true\n    tls_listen: \"[::]:8883\"\n    tls:\n      cert_file: " + cert + "\n      key_file: " + cert + "\n", "ssl://127.0.0.1:8883", "", true},
		{"external", "  url: ssl://broker.example:8883\n", "ssl://broker.example:8883", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, t.TempDir(), "data_dir: %DATA%\nmqtt:\n"+tc.mqtt)
			got, tlsConfig, err := simBrokerFromConfig(cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %q, %v; want the error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || (tlsConfig != nil) != tc.tls {
				t.Errorf("got %q, TLS %v, %v; want %q, TLS %v", got, tlsConfig != nil, err, tc.want, tc.tls)
			}
		})
	}
}
