package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/uplink"
)

// TestLoadConfig_MQTTUplink: an upstream of kind mqtt takes mqtt:// and
// mqtts:// URLs, its defaults and its own keys; bad ones fail the start
// with the file, the key and the reason.
func TestLoadConfig_MQTTUplink(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) (*Config, error) {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte("data_dir: "+dir+"\nuplink:\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadConfig(f)
	}
	c, err := load("  - name: cloud\n    kind: mqtt\n    gateway_id: gw1\n    url: mqtt://127.0.0.1:1883\n")
	if err != nil {
		t.Fatal(err)
	}
	m := c.uplinks[0].MQTT
	if m.ClientID != "" || m.Topic != "cairn/{gateway}/{device}" {
		t.Errorf("got %+v, want the default topic and no client id (the uplink's default)", m)
	}
	c, err = load("  - name: cloud\n    kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    client_id: gw-7\n    topic: dt/{gateway}/{device}/{metric}\n    inflight: 10\n    max_message_bytes: 4KiB\n    keep_alive: 5s\n    mqtt_version: 5\n")
	if err != nil {
		t.Fatal(err)
	}
	if m := c.uplinks[0].MQTT; m.ClientID != "gw-7" || m.Topic != "dt/{gateway}/{device}/{metric}" || m.Inflight != 10 || m.MaxMessageBytes != 4096 || m.KeepAlive != 5*time.Second || m.Version != uplink.MQTT5 {
		t.Errorf("got %+v", m)
	}
	c, err = load("  - name: cloud\n    kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    data: stats\n    group: hour\n")
	if err != nil {
		t.Fatal(err)
	}
	if o := c.uplinks[0]; o.Data != uplink.Stats || o.Group.String() != "hour" {
		t.Errorf("data %v, group %v; want stats by the hour", o.Data, o.Group)
	}
	c, err = load("  - name: cloud\n    kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    payload: senml\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.uplinks[0].MQTT.Payload; got != uplink.MessageSenML {
		t.Errorf("payload senml: got %s", got)
	}
	for _, tc := range []struct{ body, want string }{
		{"  - kind: mqtt\n    url: http://127.0.0.1:1883\n", `uplink[0].url: kind mqtt wants mqtt://host:port, mqtts://host:port, ws://host:port/path or wss://host:port/path (got "http://127.0.0.1:1883")`},
		{"  - kind: mqtt\n    url: mqtt://broker\n", `uplink[0].url: kind mqtt wants mqtt://host:port`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    topic: cairn/+/x\n", `uplink[0].topic: a topic to publish to has no wildcard + or #`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    topic: cairn/{site}/{device}\n", `uplink[0].topic: {site}: the template knows {gateway}, {device} and {metric}`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    max_message_bytes: 100\n", `uplink[0].max_message_bytes: must be from 1KiB to 256MiB`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    inflight: 70000\n", `uplink[0].inflight: must be from 1 to 65535 messages (got 70000)`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    payload: xml\n", `uplink[0].payload: must be json, senml or influx (got "xml")`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    client_id: a/b\n", `uplink[0].client_id: use up to 128 characters without + # / or spaces`},
		{"  - kind: mqtt\n    url: mqtts://127.0.0.1:8883\n    tls:\n      alpn: [\"a,b\"]\n", `tls.alpn: a protocol name is 1 to 255 bytes without a comma`},
		{"  - url: http://127.0.0.1:8428/write\n    topic: x\n", `uplink[0].kind: client_id, topic, payload, inflight, max_message_bytes, keep_alive and mqtt_version are for kind mqtt (got kind influx)`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    mqtt_version: 3\n", `uplink[0].mqtt_version: must be 3.1.1 or 5 (got "3")`},
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
			t.Errorf("%q: got %q, want the file name and %q", tc.body, err, tc.want)
		}
	}
}
