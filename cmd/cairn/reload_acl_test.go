package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway"
)

// TestReload_ACLFollowsTopics: SIGHUP changes sensors/{device}/telemetry
// into sensors/+/telemetry, whose payload names the device, and adds
// lab/{device}/{metric}. The kitchen, connected before or after, can no
// longer publish to sensors/kitchen/telemetry (so cannot store as the
// garage), and may publish to its new lab topic, without a restart. A
// SIGHUP that adds an ACL file opens the payload's topic to it.
func TestReload_ACLFollowsTopics(t *testing.T) {
	bin := cairnBinary.get(t)
	before := userConfig(t, "kitchen", "kitchen-secret", `    - pattern: "sensors/{device}/telemetry"
      format: json
`)
	after := strings.Replace(before, `    - pattern: "sensors/{device}/telemetry"
      format: json`, `    - pattern: "sensors/+/telemetry"
      format: json
    - pattern: "lab/{device}/{metric}"
      format: value`, 1)
	data := t.TempDir()
	cfg := writeConfig(t, data, before)
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	login := mqttLogin{user: "kitchen", password: "kitchen-secret"}

	old, err := connectAs(p.mqtt, "kitchen-old", login)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Disconnect(100)
	if err := publish1(old, "sensors/kitchen/telemetry", `{"t":20}`); err != nil {
		t.Fatal(err)
	}
	waitReadings(t, api, "kitchen", []float64{20})
	if tok := old.Publish("lab/kitchen/t", 0, false, "1"); !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
		t.Fatalf("QoS 0 publish: %v", tok.Error())
	}
	waitRefused(t, api, gateway.RefusePublish, 1) // not its topic yet

	rewrite(t, cfg, strings.ReplaceAll(after, "%DATA%", data))
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line, err := p.out.WaitLine(`msg="configuration reloaded"`, p.Exited(), startTimeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.out)
	}
	if !strings.Contains(line, "mqtt.topics") {
		t.Fatalf("reload did not apply mqtt.topics: %s", line)
	}

	// The connection from before the reload: its publish as the garage is
	// dropped (QoS 0), its new topic open.
	if tok := old.Publish("sensors/kitchen/telemetry", 0, false, `{"device":"garage","t":99}`); !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
		t.Fatalf("QoS 0 publish: %v", tok.Error())
	}
	waitRefused(t, api, gateway.RefusePublish, 2)
	if err := publish1(old, "lab/kitchen/t", "21"); err != nil {
		t.Fatalf("the kitchen's new topic, on its connection from before the reload: %v", err)
	}

	// A new connection: refused as the garage (the connection closes, as
	// MQTT 3.1.1 has no negative PUBACK), served on its new topic.
	fresh, err := connectAs(p.mqtt, "kitchen-new", login)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Disconnect(100)
	fresh.Publish("sensors/kitchen/telemetry", 1, false, `{"device":"garage","t":98}`).WaitTimeout(5 * time.Second)
	waitUntil(t, startTimeout, "the kitchen's new connection to be closed", func() (bool, string) {
		return !fresh.IsConnectionOpen(), "still connected"
	})
	waitRefused(t, api, gateway.RefusePublish, 3)
	again, err := connectAs(p.mqtt, "kitchen-new", login)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Disconnect(100)
	if err := publish1(again, "lab/kitchen/t", "22"); err != nil {
		t.Fatalf("the kitchen's new topic, on a new connection: %v", err)
	}
	waitReadings(t, api, "kitchen", []float64{20, 21, 22})
	if got := deviceNames(t, api); strings.Join(got, ",") != "kitchen" {
		t.Errorf("devices stored: %q, want only the kitchen", got)
	}

	// An ACL line, added with another SIGHUP, opens the topic to it.
	acl := writeFile(t, t.TempDir(), "acl", []byte("user kitchen\nwrite sensors/+/telemetry\n"), 0o644)
	rewrite(t, cfg, strings.ReplaceAll(strings.Replace(after, "    password_file:", "    acl_file: "+acl+"\n    password_file:", 1), "%DATA%", data))
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := p.out.WaitLine(`applied=[mqtt.embedded.acl_file]`, p.Exited(), startTimeout); err != nil {
		t.Fatalf("%v\n%s", err, p.out)
	}
	if err := publish1(again, "sensors/kitchen/telemetry", `{"device":"garage","t":97}`); err != nil {
		t.Fatalf("the kitchen as the garage, with the ACL line: %v", err)
	}
	waitReadings(t, api, "garage", []float64{97})
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
}
