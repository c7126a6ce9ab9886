package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// TestCheckConfig_DataDir: check-config fails, as a configuration error,
// for a data_dir that cannot be made or written, and passes one that can
// without leaving anything behind.
func TestCheckConfig_DataDir(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "file", []byte("x"), 0o600)
	for _, c := range []struct{ dataDir, want string }{
		{"/proc/nonexistent/x", "data_dir: cannot create /proc/nonexistent/x: make a directory in /proc: "},
		{filepath.Join(file, "x"), "data_dir: cannot reach " + filepath.Join(file, "x") + ": stat " + filepath.Join(file, "x") + ": not a directory"},
		{file, "data_dir: " + file + " is not a directory"},
	} {
		cfg := writeRawConfig(t, "data_dir: "+c.dataDir+"\n")
		var out bytes.Buffer
		err := run(context.Background(), []string{"check-config", "-config", cfg}, &out, &out)
		var ce *configError
		if !errors.As(err, &ce) {
			t.Errorf("data_dir %s: got %v, want a configuration error (exit status 78)", c.dataDir, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), cfg+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("data_dir %s: got %q, want the file and %q", c.dataDir, err, c.want)
		}
	}

	// A directory to make, and one that exists: both pass, and neither
	// check leaves a file or a directory.
	empty := t.TempDir()
	for _, dataDir := range []string{filepath.Join(empty, "new", "data"), empty} {
		cfg := writeRawConfig(t, "data_dir: "+dataDir+"\n")
		var out bytes.Buffer
		if err := run(context.Background(), []string{"check-config", "-config", cfg}, &out, &out); err != nil {
			t.Errorf("data_dir %s: %v", dataDir, err)
		}
		if left, err := os.ReadDir(empty); err != nil || len(left) != 0 {
			t.Errorf("data_dir %s: check-config left %v (%v)", dataDir, left, err)
		}
	}
}

// writeRawConfig writes yaml as a configuration file of its own folder,
// without the test defaults.
func writeRawConfig(t *testing.T, yaml string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "cairn.yaml", []byte(yaml), 0o600)
}

// TestRun_StartupConfigErrors runs the cairn binary with configurations
// that pass the file's own checks but cannot start on this machine: each
// exits with status 78, so that systemd does not restart it, naming the
// file, the key and the reason.
func TestRun_StartupConfigErrors(t *testing.T) {
	bin := cairnBinary.get(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	dir := t.TempDir()
	for _, c := range []struct{ name, yaml, want string }{
		{"data dir", "data_dir: /proc/nonexistent/x\n", "data_dir: cannot create /proc/nonexistent/x"},
		{"http address in use", fmt.Sprintf("data_dir: %s\nmqtt:\n  embedded:\n    listen: \"127.0.0.1:0\"\nhttp:\n  listen: %q\n", t.TempDir(), taken), "http.listen " + taken + ": "},
		{"mqtt address in use", fmt.Sprintf("data_dir: %s\nmqtt:\n  embedded:\n    listen: %q\nhttp:\n  listen: \"127.0.0.1:0\"\n", t.TempDir(), taken), "mqtt.embedded.listen " + taken + ": "},
		{"password file missing", fmt.Sprintf("data_dir: %s\nmqtt:\n  embedded:\n    listen: \"127.0.0.1:0\"\n    password_file: passwd\nhttp:\n  listen: \"127.0.0.1:0\"\n", t.TempDir()),
			"mqtt.embedded.password_file: open " + filepath.Join(dir, "passwd") + ": no such file or directory"},
	} {
		cfg := writeFile(t, dir, "cairn.yaml", []byte(c.yaml), 0o600)
		out, err := exec.Command(bin, "run", "-config", cfg).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
			t.Errorf("%s: exit %v, want status %d\n%s", c.name, err, exitConfig, out)
		}
		if !strings.Contains(string(out), "cairn: "+cfg+": ") || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: output %q does not name the file and %q", c.name, out, c.want)
		}
	}
}

// TestLoadConfig_RelativePaths: relative paths in a configuration file
// are relative to its folder, not to the working directory, and an error
// names the absolute path tried.
func TestLoadConfig_RelativePaths(t *testing.T) {
	dir := t.TempDir()
	addUser(t, filepath.Join(dir, "passwd"), "kitchen", "secret")
	cfg := writeFile(t, dir, "cairn.yaml", []byte(`data_dir: store
mqtt:
  embedded:
    password_file: passwd
    acl_file: rules/acl
`), 0o600)
	_, err := LoadConfig(cfg)
	if want := "mqtt.embedded.acl_file: open " + filepath.Join(dir, "rules", "acl") + ": no such file or directory"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("missing acl file: got %v, want %q", err, want)
	}
	if err := os.Mkdir(filepath.Join(dir, "rules"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "rules/acl", []byte("user kitchen\nwrite sensors/kitchen/extra\n"), 0o644)
	c, err := LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "store"); c.DataDir != want {
		t.Errorf("data_dir: got %s, want %s", c.DataDir, want)
	}
	if c.secrets.passwords == nil || c.secrets.passwords.Len() != 1 {
		t.Errorf("password file beside the configuration: got %v, want its one user", c.secrets.passwords)
	}
}

func TestParseConfig_MaxPayload(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want ByteSize
	}{{"1024", 1024}, {"256KiB", 256 << 10}, {"1MiB", 1 << 20}, {"100KB", 100e3}} {
		cfg, err := ParseConfig(strings.NewReader("mqtt:\n  max_payload: " + tc.yaml + "\n  embedded:\n    limits:\n      max_packet_size: 2097152\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		if got := ByteSize(cfg.MQTT.MaxPayload); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.yaml, got, tc.want)
		}
	}
}

// TestRun_TLSOnlyBroker: with only a TLS listener, the start-up line,
// check-config and the status name its address.
func TestRun_TLSOnlyBroker(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cairn test CA")
	srvCert, srvKey := ca.issue(t, "gateway", true)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  embedded:
    listen: ""
    tls_listen: "127.0.0.1:0"
    tls:
      cert_file: %s
      key_file: %s
    allow_anonymous: true
http:
  listen: "127.0.0.1:0"
`, writeFile(t, dir, "server.pem", srvCert, 0o644), writeFile(t, dir, "server.key", srvKey, 0o600)))

	var out bytes.Buffer
	if err := run(context.Background(), []string{"check-config", "-config", cfg}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "embedded broker on 127.0.0.1:0 (TLS)") {
		t.Errorf("check-config: %q does not name the TLS listener", out.String())
	}

	d := startDaemon(t, cfg)
	if _, port, err := net.SplitHostPort(d.mqtt); err != nil || port == "0" {
		t.Fatalf("started line: mqtt=%q, want the TLS listener's address", d.mqtt)
	}
	st := statusAs[struct {
		MQTT struct {
			Address string `json:"address"`
		} `json:"mqtt"`
	}](t, newAPIClient(d.http))
	if st.MQTT.Address != d.mqtt {
		t.Errorf("status mqtt.address: got %q, want %q", st.MQTT.Address, d.mqtt)
	}
	opts := paho.NewClientOptions().AddBroker("ssl://" + d.mqtt).SetClientID("tls-only").SetTLSConfig(clientTLS(t, ca, nil, nil))
	c := paho.NewClient(opts)
	waitToken(t, c.Connect())
	c.Disconnect(0)
}

// TestRun_DataDirOfAnotherUser runs the cairn binary as nobody on a data
// directory it may write in but whose store files belong to root (a first
// run by hand as root, then the service): it exits with status 78, naming
// the file, data_dir and the file it cannot open.
func TestRun_DataDirOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run cairn as another user")
	}
	// A folder nobody can reach: t.TempDir's are root's alone.
	dir, err := os.MkdirTemp("", "cairn-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(cairnBinary.get(t))
	if err != nil {
		t.Fatal(err)
	}
	exe := writeFile(t, dir, "cairn", bin, 0o755)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o777); err != nil {
		t.Fatal(err)
	}
	manifest := writeFile(t, data, "MANIFEST", nil, 0o600)
	cfg := writeFile(t, dir, "cairn.yaml", []byte("data_dir: data\nmqtt:\n  embedded:\n    listen: \"127.0.0.1:0\"\nhttp:\n  listen: \"127.0.0.1:0\"\nclock:\n  trust: always\n"), 0o644)
	cmd := exec.Command(exe, "run", "-config", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
		t.Errorf("exit %v, want status %d\n%s", err, exitConfig, out)
	}
	if want := cfg + ": data_dir: open store " + data + ": open " + manifest + ": permission denied"; !strings.Contains(string(out), want) {
		t.Errorf("output %q does not contain %q", out, want)
	}
}
