package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/gateway"
)

// mosquittoPub runs Mosquitto's mosquitto_pub against the broker at addr
// with args, and returns what it printed and how it exited.
func mosquittoPub(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("mosquitto_pub")
	if err != nil {
		t.Fatalf("this test needs mosquitto_pub (%v): apt-get install mosquitto-clients", err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}

// deviceNames returns the devices /v1/devices lists.
func deviceNames(t *testing.T, api *apiClient) []string {
	t.Helper()
	var doc struct {
		Devices []struct{ Device string } `json:"devices"`
	}
	if code := api.get(t, "/v1/devices", &doc); code != http.StatusOK {
		t.Fatalf("GET /v1/devices: %d", code)
	}
	var names []string
	for _, d := range doc.Devices {
		names = append(names, d.Device)
	}
	return names
}

// userConfig adds user with password to a new password file and returns
// a configuration (for writeConfig) of the embedded broker with that file
// and mqtt.topics (list items indented by four spaces), and the HTTP API,
// on ports picked at each start.
func userConfig(t *testing.T, user, password, topics string) string {
	t.Helper()
	passwd := filepath.Join(t.TempDir(), "passwd")
	addUser(t, passwd, user, password)
	return `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
    password_file: ` + passwd + `
  topics:
` + topics + `http:
  listen: "127.0.0.1:0"
`
}

// payloadDeviceConfig has a topic whose payload names the device before
// the sensors' own topics, as in the report of the hole it closes: the
// first route decodes sensors/kitchen/bulk, and it is no user's own.
const payloadDeviceConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
    password_file: %PASSWD%
%ACL%  topics:
    - pattern: "sensors/+/bulk"
      format: json
    - pattern: "sensors/{device}/{metric}"
http:
  listen: "127.0.0.1:0"
`

// TestRun_PayloadDeviceNeedsACLLine: a sensor with a password publishes,
// with mosquitto_pub, a document naming another device on a topic that
// its own pattern matches too, but that a route reading the device from
// the payload decodes. It is refused (MQTT 3.1.1: the connection closes
// instead of a PUBACK; MQTT 5: PUBACK "not authorized"; QoS 0: dropped),
// counted, and nothing is stored under another name, while the sensor's
// own topic works. With an ACL line that opens the topic to it, the same
// publish is stored.
func TestRun_PayloadDeviceNeedsACLLine(t *testing.T) {
	bin := cairnBinary.get(t)
	const doc = `{"device":"garage","temperature":99.9}`
	for _, tc := range []struct {
		name, acl string
	}{
		{"no ACL line", ""},
		{"an ACL line opens it", "user kitchen\nwrite sensors/+/bulk\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			passwd := filepath.Join(dir, "passwd")
			addUser(t, passwd, "kitchen", "kitchen-secret")
			acl := ""
			if tc.acl != "" {
				acl = "    acl_file: " + writeFile(t, dir, "acl", []byte(tc.acl), 0o644) + "\n"
			}
			cfg := strings.NewReplacer("%PASSWD%", passwd, "%ACL%", acl).Replace(payloadDeviceConfig)
			p := startCairn(t, bin, writeConfig(t, t.TempDir(), cfg))
			api := newAPIClient(p.http)
			login := []string{"-u", "kitchen", "-P", "kitchen-secret", "-i", "kitchen-1"}
			pub := func(args ...string) (string, error) {
				return mosquittoPub(t, p.mqtt, append(append([]string{}, login...), args...)...)
			}

			out, err := pub("-q", "1", "-t", "sensors/kitchen/bulk", "-m", doc)
			if tc.acl != "" {
				if err != nil {
					t.Fatalf("mosquitto_pub with the ACL line: %v\n%s", err, out)
				}
				waitReadings(t, api, "garage", []float64{99.9})
				return
			}
			if err == nil {
				t.Errorf("mosquitto_pub (MQTT 3.1.1, QoS 1): exited 0, want the connection closed without a PUBACK\n%s", out)
			}
			out, err = pub("-V", "mqttv5", "-q", "1", "-t", "sensors/kitchen/bulk", "-m", doc)
			if !strings.Contains(out, "Not authorized") {
				t.Errorf("mosquitto_pub (MQTT 5, QoS 1): %v, want a PUBACK saying not authorized\n%s", err, out)
			}
			// Each QoS 0 publish under its own client id: mosquitto_pub
			// leaves at once, and a next connection under the same id
			// would take the session over, perhaps before the broker has
			// read the PUBLISH (QoS 0 may be lost so).
			for i, m := range []string{doc, `{"device":"<script>alert(1)</script>","t":1}`, `{"device":"=HYPERLINK(\"http://evil\",\"x\")","t":1}`} {
				if out, err := pub("-q", "0", "-i", fmt.Sprintf("kitchen-q0-%d", i), "-t", "sensors/kitchen/bulk", "-m", m); err != nil {
					t.Fatalf("mosquitto_pub (QoS 0): %v\n%s", err, out)
				}
			}
			waitRefused(t, api, gateway.RefusePublish, 5)
			if out, err := pub("-q", "1", "-t", "sensors/kitchen/temperature", "-m", "21.5"); err != nil {
				t.Fatalf("the kitchen publishing as itself: %v\n%s", err, out)
			}
			waitReadings(t, api, "kitchen", []float64{21.5})
			if got := deviceNames(t, api); strings.Join(got, ",") != "kitchen" {
				t.Errorf("devices stored: %q, want only the kitchen", got)
			}
			if code, body, err := api.fetch("/v1/devices/garage/readings"); err != nil || code != http.StatusNotFound {
				t.Errorf("garage's readings: %d %v %s, want 404", code, err, body)
			}
		})
	}
}

// TestRun_UserNamedLikeABaseTopic: with the esphome preset, whose topics
// start with the device, a user named homeassistant may not publish to
// homeassistant/sensor/t/state, though it has the shape of its own state
// topic: the discovery reader decodes it, which would give the unit of
// any device's readings. A discovery message from a client the broker
// trusts (anonymous on loopback) does give it.
func TestRun_UserNamedLikeABaseTopic(t *testing.T) {
	bin := cairnBinary.get(t)
	cfg := userConfig(t, "homeassistant", "ha-secret", `    - preset: esphome
`)
	p := startCairn(t, bin, writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(p.http)
	const discovery = `{"unit_of_meas":"°F","stat_t":"garage/sensor/t/state"}`
	ha := []string{"-u", "homeassistant", "-P", "ha-secret", "-q", "1", "-t", "homeassistant/sensor/t/state", "-m", discovery}
	if out, err := mosquittoPub(t, p.mqtt, ha...); err == nil {
		t.Errorf("homeassistant's discovery message (MQTT 3.1.1): exited 0, want refused\n%s", out)
	}
	if out, err := mosquittoPub(t, p.mqtt, append([]string{"-V", "mqttv5"}, ha...)...); !strings.Contains(out, "Not authorized") {
		t.Errorf("homeassistant's discovery message (MQTT 5): %v, want a PUBACK saying not authorized\n%s", err, out)
	}
	waitRefused(t, api, gateway.RefusePublish, 2)
	unitOf := func() string {
		var doc struct {
			Unit string `json:"unit"`
		}
		if code := api.get(t, "/v1/devices/garage/readings?limit=1&metric=t", &doc); code != http.StatusOK {
			t.Fatalf("garage's readings: %d", code)
		}
		return doc.Unit
	}
	anonymous := func(topic, payload string) {
		t.Helper()
		if out, err := mosquittoPub(t, p.mqtt, "-q", "1", "-t", topic, "-m", payload); err != nil {
			t.Fatalf("anonymous mosquitto_pub to %s: %v\n%s", topic, err, out)
		}
	}
	anonymous("garage/sensor/t/state", "21")
	waitReadings(t, api, "garage", []float64{21})
	if u := unitOf(); u != "" {
		t.Errorf("garage's unit after homeassistant's refused discovery message: %q, want none", u)
	}
	anonymous("homeassistant/sensor/garage/config", discovery)
	anonymous("garage/sensor/t/state", "22")
	waitReadings(t, api, "garage", []float64{21, 22})
	if u := unitOf(); u != "°F" {
		t.Errorf("garage's unit after a trusted discovery message: %q, want °F", u)
	}
}

// TestRun_SensorWithALastWill: a Tasmota with a password connects with
// its default last will on tele/NAME/LWT, an availability topic that is
// skipped, not stored: it is the sensor's own, so the broker lets the
// will through at CONNECT and the sensor's STATE is stored. A will on
// another device's LWT is refused.
func TestRun_SensorWithALastWill(t *testing.T) {
	bin := cairnBinary.get(t)
	cfg := userConfig(t, "tasmota_1A2B3C", "t-secret", `    - preset: tasmota
`)
	p := startCairn(t, bin, writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(p.http)
	pub := func(will string) (string, error) {
		return mosquittoPub(t, p.mqtt, "-u", "tasmota_1A2B3C", "-P", "t-secret", "-q", "1",
			"--will-topic", will, "--will-payload", "Offline", "--will-retain",
			"-t", "tele/tasmota_1A2B3C/STATE", "-m", `{"Time":"2024-05-01T12:00:00","UptimeSec":42}`)
	}
	if out, err := pub("tele/tasmota_1A2B3C/LWT"); err != nil {
		t.Fatalf("mosquitto_pub with the sensor's own last will: %v\n%s", err, out)
	}
	waitReadings(t, api, "tasmota_1A2B3C", []float64{42})
	if out, err := pub("tele/garage/LWT"); err == nil {
		t.Errorf("mosquitto_pub with a will on another device's LWT: exited 0, want refused\n%s", out)
	}
	waitRefused(t, api, gateway.RefuseOtherDevice, 1)
}
