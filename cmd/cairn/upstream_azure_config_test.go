package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/uplink"
)

// testDeviceKey is a device key as the Azure portal shows one: 32 bytes in
// base64.
const testDeviceKey = "q2VYxSa5+I/HhtuWDw2iM9q1UTIhSB4ThjnZ6XtmOPE="

// TestLoadConfig_AzureUplink: an upstream of kind mqtt with azure: logs in
// as the device (client id, user name and a token signed with the key
// from key_file) and publishes to the device's events topic; bad keys,
// and a key file that is missing, open to others or not a key, fail the
// start with the file, the key and the reason.
func TestLoadConfig_AzureUplink(t *testing.T) {
	dir := t.TempDir()
	keyFile := writeFile(t, dir, "device.key", []byte(testDeviceKey+"\n"), 0o600)
	load := func(body string) (*Config, error) {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte("data_dir: "+dir+"\nuplink:\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadConfig(f)
	}
	c, err := load("  - name: hub\n    kind: mqtt\n    url: mqtts://my-hub.azure-devices.net:8883\n    azure:\n      device_id: pi-kitchen\n      key_file: device.key\n")
	if err != nil {
		t.Fatal(err)
	}
	m := c.uplinks[0].MQTT
	if m.ClientID != "pi-kitchen" || m.Topic != "devices/pi-kitchen/messages/events/" || m.SAS == nil {
		t.Fatalf("got client id %q, topic %q, SAS %v; want the device id, its events topic and a token renewer", m.ClientID, m.Topic, m.SAS)
	}
	user, token := m.SAS.Credentials()
	if want := "my-hub.azure-devices.net/pi-kitchen/?api-version=2021-04-12"; user != want {
		t.Errorf("user name: got %q, want %q", user, want)
	}
	sas, err := uplink.NewAzureSAS("my-hub.azure-devices.net", "pi-kitchen", testDeviceKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := sas.Token(m.SAS.Expiry()); token != want {
		t.Errorf("token: got %q, want %q", token, want)
	}
	if life := time.Until(m.SAS.Expiry()); life < 59*time.Minute || life > 61*time.Minute {
		t.Errorf("token expires in %s, want the default 1h", life)
	}

	// tls.server_name names the hub when the url is an address.
	c, err = load("  - name: hub\n    kind: mqtt\n    url: mqtts://10.0.0.7:8883\n    topic: devices/pi-kitchen/messages/events/site=kitchen\n    tls:\n      server_name: my-hub.azure-devices.net\n    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n      token_lifetime: 5s\n")
	if err != nil {
		t.Fatal(err)
	}
	m = c.uplinks[0].MQTT
	if user, _ := m.SAS.Credentials(); !strings.HasPrefix(user, "my-hub.azure-devices.net/pi-kitchen/") || m.Topic != "devices/pi-kitchen/messages/events/site=kitchen" {
		t.Errorf("got user %q, topic %q", user, m.Topic)
	}
	if life := time.Until(m.SAS.Expiry()); life < 4*time.Second || life > 7*time.Second {
		t.Errorf("token expires in %s, want token_lifetime 5s", life)
	}

	open := writeFile(t, dir, "open.key", []byte(testDeviceKey), 0o644)
	notKey := writeFile(t, dir, "not.key", []byte("my-password\n"), 0o600)
	entry := "  - kind: mqtt\n    url: mqtts://my-hub.azure-devices.net:8883\n"
	for _, tc := range []struct{ body, want string }{
		{entry + "    azure:\n      device_id: pi-kitchen\n      key_file: missing.key\n",
			"uplink[0].azure.key_file: open " + filepath.Join(dir, "missing.key") + ": no such file or directory"},
		{entry + "    azure:\n      device_id: pi-kitchen\n      key_file: " + notKey + "\n",
			"uplink[0].azure.key_file: " + notKey + ": not a device key (the primary or secondary key as the portal shows it, in base64): illegal base64 data"},
		{entry + "    azure:\n      device_id: pi-kitchen\n      key_file: " + open + "\n",
			"uplink[0].azure.key_file: " + open},
		{entry + "    azure:\n      key_file: " + keyFile + "\n",
			`uplink[0].azure.device_id: must be the device's id in IoT Hub: 1 to 128 of A-Z a-z 0-9 - . % _ * ? ! ( ) , : = @ $ ' (got "")`},
		{entry + "    azure:\n      device_id: pi/kitchen\n      key_file: " + keyFile + "\n",
			`uplink[0].azure.device_id: must be the device's id in IoT Hub`},
		{entry + "    azure:\n      device_id: pi-kitchen\n",
			"uplink[0].azure.key_file: must be set: a file holding the device's primary or secondary key"},
		{entry + "    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n      token_lifetime: 2s\n",
			"uplink[0].azure.token_lifetime: must be at least 5s (got 2s); the default is 1h0m0s"},
		{entry + "    auth:\n      username: gw\n      password_file: " + keyFile + "\n    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n",
			"uplink[0].auth: azure logs in with the device key: leave username and password_file out"},
		{entry + "    mqtt_version: 5\n    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n",
			`uplink[0].mqtt_version: IoT Hub speaks MQTT 3.1.1: leave it out with azure (got "5")`},
		{entry + "    client_id: gw-1\n    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n",
			`uplink[0].client_id: IoT Hub takes the device id as client id: leave it out (got "gw-1", device_id "pi-kitchen")`},
		{entry + "    topic: cairn/{device}\n    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n",
			`uplink[0].topic: IoT Hub takes a device's messages on devices/pi-kitchen/messages/events/, with message properties after it, or leave it out (got "cairn/{device}")`},
		{"  - url: http://127.0.0.1:8428/write\n    azure:\n      device_id: pi-kitchen\n      key_file: " + keyFile + "\n",
			"uplink[0].azure: is for kind mqtt, IoT Hub's MQTT (got kind influx)"},
	} {
		_, err := load(tc.body)
		if err == nil {
			t.Errorf("%q: got no error, want %q", tc.body, tc.want)
			continue
		}
		var ce *configError
		if !errors.As(err, &ce) {
			t.Errorf("%q: got %T, want a configError (exit status 78)", tc.body, err)
		}
		if !strings.HasPrefix(err.Error(), filepath.Join(dir, "c.yaml")+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\ngot  %q\nwant the file name and %q", tc.body, err, tc.want)
		}
	}
}

// TestRun_AzureKeyFileErrors runs the cairn binary, run and check-config,
// with a device key file that is missing and one that holds no key: each
// exits with status 78, naming the configuration file, the key and the
// reason.
func TestRun_AzureKeyFileErrors(t *testing.T) {
	bin := cairnBinary.get(t)
	dir := t.TempDir()
	notKey := writeFile(t, dir, "not.key", []byte("SharedAccessKey=abc\n"), 0o600)
	for _, c := range []struct{ name, keyFile, want string }{
		{"missing", filepath.Join(dir, "missing.key"), "uplink[0].azure.key_file: open " + filepath.Join(dir, "missing.key") + ": no such file or directory"},
		{"not a key", notKey, "uplink[0].azure.key_file: " + notKey + ": not a device key"},
	} {
		cfg := writeConfig(t, dir, localConfig+`uplink:
  - name: hub
    kind: mqtt
    url: mqtts://my-hub.azure-devices.net:8883
    azure:
      device_id: pi-kitchen
      key_file: `+c.keyFile+"\n")
		for _, cmd := range []string{"run", "check-config"} {
			out, err := exec.Command(bin, cmd, "-config", cfg).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
				t.Errorf("%s, cairn %s: exit %v, want status %d\n%s", c.name, cmd, err, exitConfig, out)
			}
			if !strings.Contains(string(out), cfg+": ") || !strings.Contains(string(out), c.want) {
				t.Errorf("%s, cairn %s: output %q does not name the file and %q", c.name, cmd, out, c.want)
			}
		}
	}
}
