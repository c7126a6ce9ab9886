package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// waitListening waits until something accepts connections on
// 127.0.0.1:port (a broker's second listener).
func waitListening(t *testing.T, port int) {
	t.Helper()
	waitUntil(t, startTimeout, fmt.Sprintf("a listener on port %d", port), func() (bool, string) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		return c.Close() == nil, ""
	})
}

// TestMQTTUplink_WebSocketTLS runs cairn with an upstream at wss://, to
// Mosquitto's websockets listener with TLS, a client certificate
// required and its CN the user the ACL knows (the cloud of the other
// MQTT tests, reached over a WebSocket): every reading arrives once
// under its id at a subscriber on the broker's MQTT listener, across a
// restart of the broker while a backlog goes.
func TestMQTTUplink_WebSocketTLS(t *testing.T) {
	bin := cairnBinary.get(t)
	wsPort := freePort(t)
	cloud := startMQTTCloud(t, "") // its files first: the listener below names them
	cloud.stop(t)
	conf, err := os.ReadFile(cloud.conf)
	if err != nil {
		t.Fatal(err)
	}
	ws := fmt.Sprintf(`listener %d 127.0.0.1
protocol websockets
cafile %s
certfile %s
keyfile %s
require_certificate true
use_identity_as_username true
`, wsPort, cloud.caFile, filepath.Join(cloud.dir, "broker.pem"), filepath.Join(cloud.dir, "broker.key"))
	if err := os.WriteFile(cloud.conf, append(conf, ws...), 0o600); err != nil {
		t.Fatal(err)
	}
	cloud.start(t)
	waitListening(t, wsPort)
	sink := cloud.subscribe(t)

	entry := strings.Replace(cloud.entry("    max_bytes_per_second: 64KiB\n    max_message_bytes: 4096\n"),
		fmt.Sprintf("url: mqtts://127.0.0.1:%d", cloud.port), fmt.Sprintf("url: wss://127.0.0.1:%d/mqtt", wsPort), 1)
	cfg := writeConfig(t, t.TempDir(), localConfig+entry)
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 4, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 1500)
	waitUntil(t, 60*time.Second, "500 readings at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		return ids >= 500, fmt.Sprintf("%d ids, %d readings; status %+v", ids, got, uplinkStatuses(t, api)["cloud"])
	})
	if st := uplinkStatuses(t, api)["cloud"]; st.PendingReadings == 0 {
		t.Fatalf("the backlog went before the broker's restart: %+v", st)
	}
	cloud.stop(t)
	cloud.start(t)
	waitListening(t, wsPort)
	want := 2 * fleet.acks.count()
	waitUntil(t, 60*time.Second, "every reading at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids >= want && st.PendingReadings == 0, fmt.Sprintf("%d ids of %d, %d readings; status %+v", ids, want, got, st)
	})
	sink.check(t, fleet.msgs, fleet.acks, 4096)
	ids, got := sink.counts()
	t.Logf("%d readings once each, %d received in all; status %+v", ids, got, uplinkStatuses(t, api)["cloud"])
}

// TestMQTTUplink_WebSocketPassword runs cairn with an upstream at ws://,
// Mosquitto's websockets listener without TLS, logging in with
// auth.username and auth.password_file: the reading arrives at a
// subscriber on the broker's MQTT listener.
func TestMQTTUplink_WebSocketPassword(t *testing.T) {
	wsPort := freePort(t)
	broker, passwd := startMosquittoAuth(t, "gw", "gw-pass", fmt.Sprintf("listener %d 127.0.0.1\nprotocol websockets\n", wsPort))
	waitListening(t, wsPort)
	mosquittoPasswd(t, passwd, "reader", "reader-pass")
	if err := broker.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	got := make(chan paho.Message, 16)
	opts := testkit.PublisherOptions("tcp://"+broker.addr(), "reader", startTimeout).SetUsername("reader").SetPassword("reader-pass")
	var reader paho.Client
	waitUntil(t, startTimeout, "the reader to log in", func() (bool, string) {
		c, err := testkit.Connect(opts, startTimeout)
		if err != nil {
			return false, err.Error()
		}
		reader = c
		return true, ""
	})
	t.Cleanup(func() { reader.Disconnect(100) })
	waitToken(t, reader.Subscribe("cairn/#", 1, func(_ paho.Client, m paho.Message) { got <- m }))

	dir := t.TempDir()
	cfg := writeConfig(t, dir, localConfig+fmt.Sprintf(`uplink:
  - name: cloud
    kind: mqtt
    url: ws://127.0.0.1:%d/mqtt
    gateway_id: %s
    interval: 100ms
    auth:
      username: gw
      password_file: %s
`, wsPort, mqttUpstreamGateway, writeFile(t, dir, "mqtt-pass", []byte("gw-pass\n"), 0o600)))
	d := startDaemon(t, cfg)
	pub := mustConnect(t, d.mqtt, "sensor")
	if err := publish1(pub, "sensors/kitchen/telemetry", `{"temperature":21.5}`); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if want := "cairn/" + mqttUpstreamGateway + "/kitchen"; m.Topic() != want || !strings.Contains(string(m.Payload()), `"value":21.5`) {
			t.Errorf("got %s %s, want the reading on %s", m.Topic(), m.Payload(), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no message over ws:// in 30 s; status %+v", uplinkStatuses(t, newAPIClient(d.http))["cloud"])
	}
}

// TestLoadConfig_MQTTOverWebSocket: kind mqtt takes ws:// and wss://
// URLs; tls keys with a URL without TLS, and an ALPN protocol other than
// HTTP/1.1 with wss://, fail the start naming the key.
func TestLoadConfig_MQTTOverWebSocket(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) (*Config, error) {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte("data_dir: "+dir+"\nuplink:\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadConfig(f)
	}
	ca := writeFile(t, dir, "ca.pem", newTestCA(t, "ws CA").pem, 0o644)
	for _, body := range []string{
		"  - kind: mqtt\n    url: ws://127.0.0.1:8080/mqtt\n",
		"  - kind: mqtt\n    url: wss://127.0.0.1:8443/mqtt\n    tls:\n      ca_file: " + ca + "\n",
		"  - kind: mqtt\n    url: wss://127.0.0.1:443/mqtt\n    tls:\n      alpn: [http/1.1]\n",
	} {
		c, err := load(body)
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		u := c.uplinks[0]
		if wantTLS := strings.Contains(body, "wss://"); (u.TLS != nil) != wantTLS {
			t.Errorf("%q: TLS config %v, want one: %v", body, u.TLS, wantTLS)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{"  - kind: mqtt\n    url: wss://127.0.0.1/mqtt\n", `uplink[0].url: kind mqtt wants mqtt://host:port, mqtts://host:port, ws://host:port/path or wss://host:port/path (got "wss://127.0.0.1/mqtt")`},
		{"  - kind: mqtt\n    url: https://127.0.0.1:443/mqtt\n", `uplink[0].url: kind mqtt wants`},
		{"  - kind: mqtt\n    url: ws://127.0.0.1:8080/mqtt\n    tls:\n      ca_file: " + ca + "\n", `uplink[0].tls: is for mqtts:// and wss:// URLs (got "ws://127.0.0.1:8080/mqtt", which has no TLS)`},
		{"  - kind: mqtt\n    url: mqtt://127.0.0.1:1883\n    tls:\n      server_name: iot.example\n", `uplink[0].tls: is for mqtts:// and wss:// URLs`},
		{"  - kind: mqtt\n    url: wss://127.0.0.1:443/mqtt\n    tls:\n      alpn: [x-amzn-mqtt-ca]\n", `uplink[0].tls.alpn: a wss:// connection speaks HTTP/1.1 first: offer no other protocol (got "x-amzn-mqtt-ca")`},
	} {
		_, err := load(tc.body)
		var ce *configError
		switch {
		case err == nil:
			t.Errorf("%q: got no error, want %q", tc.body, tc.want)
		case !errors.As(err, &ce):
			t.Errorf("%q: got %T, want a configError (exit status 78)", tc.body, err)
		case !strings.HasPrefix(err.Error(), filepath.Join(dir, "c.yaml")+": ") || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%q: got %q, want the file name and %q", tc.body, err, tc.want)
		}
	}
}

// startConnectProxy starts an HTTP proxy on 127.0.0.1 that takes CONNECT
// requests for any host and joins them to 127.0.0.1:port, and records
// the hosts asked for on the channel it returns.
func startConnectProxy(t *testing.T, port int) (addr string, asked <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hosts := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				select {
				case hosts <- req.Host:
				default:
				}
				back, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				if err != nil {
					return
				}
				defer back.Close()
				if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
					return
				}
				go io.Copy(back, br)
				io.Copy(c, back)
			}()
		}
	}()
	return ln.Addr().String(), hosts
}

// TestMQTTUplink_WebSocketThroughProxy: cairn with HTTPS_PROXY in its
// environment reaches a wss:// upstream through that proxy (a CONNECT to
// the broker's host and port), as a network that lets only a proxy out
// needs; the TLS inside checks the broker's name, and the reading
// arrives.
func TestMQTTUplink_WebSocketThroughProxy(t *testing.T) {
	bin := cairnBinary.get(t)
	dir := t.TempDir()
	ca := newTestCA(t, "proxy test CA")
	cert, key := ca.issue(t, "broker.test", true)
	wsPort := freePort(t)
	broker, passwd := startMosquittoAuth(t, "gw", "gw-pass", fmt.Sprintf("listener %d 127.0.0.1\nprotocol websockets\ncertfile %s\nkeyfile %s\n",
		wsPort, writeFile(t, dir, "broker.pem", cert, 0o644), writeFile(t, dir, "broker.key", key, 0o600)))
	waitListening(t, wsPort)
	mosquittoPasswd(t, passwd, "reader", "reader-pass")
	if err := broker.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	got := make(chan paho.Message, 16)
	opts := testkit.PublisherOptions("tcp://"+broker.addr(), "reader", startTimeout).SetUsername("reader").SetPassword("reader-pass")
	var reader paho.Client
	waitUntil(t, startTimeout, "the reader to log in", func() (bool, string) {
		c, err := testkit.Connect(opts, startTimeout)
		if err != nil {
			return false, err.Error()
		}
		reader = c
		return true, ""
	})
	t.Cleanup(func() { reader.Disconnect(100) })
	waitToken(t, reader.Subscribe("cairn/#", 1, func(_ paho.Client, m paho.Message) { got <- m }))

	proxy, asked := startConnectProxy(t, wsPort)
	// broker.test resolves nowhere: only the proxy, which joins any host
	// to the broker, can reach it.
	cfg := writeConfig(t, dir, localConfig+fmt.Sprintf(`uplink:
  - name: cloud
    kind: mqtt
    url: wss://broker.test:%d/mqtt
    gateway_id: %s
    interval: 100ms
    auth:
      username: gw
      password_file: %s
    tls:
      ca_file: %s
`, wsPort, mqttUpstreamGateway, writeFile(t, dir, "mqtt-pass", []byte("gw-pass\n"), 0o600), writeFile(t, dir, "ca.pem", ca.pem, 0o644)))
	p := startCairnEnv(t, bin, cfg, []string{"HTTPS_PROXY=http://" + proxy, "https_proxy=", "NO_PROXY=", "no_proxy="})
	pub := mustConnect(t, p.mqtt, "sensor")
	if err := publish1(pub, "sensors/kitchen/telemetry", `{"temperature":21.5}`); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if want := "cairn/" + mqttUpstreamGateway + "/kitchen"; m.Topic() != want || !strings.Contains(string(m.Payload()), `"value":21.5`) {
			t.Errorf("got %s %s, want the reading on %s", m.Topic(), m.Payload(), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no message through the proxy in 30 s; status %+v", uplinkStatuses(t, newAPIClient(p.http))["cloud"])
	}
	if h, want := <-asked, fmt.Sprintf("broker.test:%d", wsPort); h != want {
		t.Errorf("the proxy was asked to CONNECT %s, want %s", h, want)
	}
}
