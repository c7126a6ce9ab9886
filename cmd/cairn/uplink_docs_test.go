package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// docBlockRE finds a block of a docs page marked for a test: a line
// `<!-- test: NAME -->`, then a fenced block.
var docBlockRE = regexp.MustCompile("(?m)^<!-- test: ([a-z0-9-]+) -->\n```[a-z]*\n((?s:.*?))```\n")

// docBlocks returns the marked blocks of the page docs/name, by name.
func docBlocks(t *testing.T, name string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	blocks := make(map[string]string)
	for _, m := range docBlockRE.FindAllStringSubmatch(string(b), -1) {
		if _, dup := blocks[m[1]]; dup {
			t.Fatalf("docs/%s: two blocks marked %q", name, m[1])
		}
		blocks[m[1]] = m[2]
	}
	return blocks
}

var (
	// docURLRE finds an example's broker address.
	docURLRE = regexp.MustCompile(`(?m)^(\s+url: [a-z]+://)[^/\s]+(/\S*)?$`)
	// docFileRE finds an example's file paths.
	docFileRE = regexp.MustCompile(`/etc/cairn/[^\s#]+`)
)

// localExample makes an example of the docs run here: the broker at
// addr in place of the cloud's host and port, and each /etc/cairn/… file
// as the file of that base name in files, which must hold it. Nothing
// else of the example changes.
func localExample(t *testing.T, example, addr string, files map[string]string) string {
	t.Helper()
	if n := len(docURLRE.FindAllString(example, -1)); n != 1 {
		t.Fatalf("the example has %d url: lines, want 1:\n%s", n, example)
	}
	example = docURLRE.ReplaceAllString(example, "${1}"+addr+"${2}")
	return docFileRE.ReplaceAllStringFunc(example, func(p string) string {
		f, ok := files[filepath.Base(p)]
		if !ok {
			t.Fatalf("the example names %s, which the test does not make", p)
		}
		return f
	})
}

// awsPolicyTopic returns the MQTT topic filter that the AWS IoT policy
// lets thing publish to: its iot:Publish resource after "topic/", with
// the thing name in place of ${iot:Connection.Thing.ThingName} and a
// trailing * as #.
func awsPolicyTopic(t *testing.T, policy, thing string) string {
	t.Helper()
	var p struct {
		Statement []struct {
			Effect, Action, Resource string
		}
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		t.Fatalf("the policy: %v", err)
	}
	for _, s := range p.Statement {
		if s.Effect != "Allow" || s.Action != "iot:Publish" {
			continue
		}
		_, topic, ok := strings.Cut(s.Resource, ":topic/")
		topic = strings.ReplaceAll(topic, "${iot:Connection.Thing.ThingName}", thing)
		if !ok || !strings.HasSuffix(topic, "/*") || strings.ContainsAny(strings.TrimSuffix(topic, "*"), "*$+#") {
			t.Fatalf("the policy's iot:Publish resource %q is not topic/<prefix>/*", s.Resource)
		}
		return strings.TrimSuffix(topic, "*") + "#"
	}
	t.Fatal("the policy allows no iot:Publish")
	return ""
}

// docCloud is a Mosquitto configured as a cloud broker of the docs'
// examples, and how a subscriber logs in to it.
type docCloud struct {
	*mosquitto
	files    map[string]string // the example's files, by base name
	readerTL *tls.Config       // nil: no TLS
	readerPW string            // the reader's password; "": none
	ws       int               // the port of its websockets listener; 0: none
}

// exampleAddr returns the host and port that cairn's example is to
// reach: the websockets listener, if c has one.
func (c *docCloud) exampleAddr() string {
	if c.ws != 0 {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ws))
	}
	return c.addr()
}

// startDocCloud starts Mosquitto for the example named name of
// docs/uplink.md, with its files made under dir.
func startDocCloud(t *testing.T, name string, blocks map[string]string) *docCloud {
	t.Helper()
	me, err := currentUser()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &docCloud{files: make(map[string]string)}
	m := &mosquitto{bin: mosquittoBin(t), conf: filepath.Join(dir, "mosquitto.conf"), port: freePort(t)}
	c.mosquitto = m
	ca := newTestCA(t, "cloud CA")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	caFile := writeFile(t, dir, "ca.pem", ca.pem, 0o644)
	brokerCert, brokerKey := ca.issue(t, "broker", true)
	tlsListener := fmt.Sprintf("cafile %s\ncertfile %s\nkeyfile %s\n", caFile,
		writeFile(t, dir, "broker.pem", brokerCert, 0o644), writeFile(t, dir, "broker.key", brokerKey, 0o600))
	conf := fmt.Sprintf("per_listener_settings false\nuser %s\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\n", me)
	switch name {
	case "aws", "aws-443":
		c.files["AmazonRootCA1.pem"] = caFile
		cert, key := ca.issue(t, "pi-kitchen", false)
		c.files["pi-kitchen.cert.pem"] = writeFile(t, dir, "pi-kitchen.cert.pem", cert, 0o644)
		c.files["pi-kitchen.private.key"] = writeFile(t, dir, "pi-kitchen.private.key", key, 0o600)
		rCert, rKey := ca.issue(t, "reader", false)
		reader, err := tls.X509KeyPair(rCert, rKey)
		if err != nil {
			t.Fatal(err)
		}
		c.readerTL = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{reader}}
		acl := fmt.Sprintf("user pi-kitchen\ntopic write %s\n\nuser reader\ntopic read #\n", awsPolicyTopic(t, blocks["aws-policy"], "pi-kitchen"))
		conf += fmt.Sprintf("allow_anonymous false\nacl_file %s\nlistener %d 127.0.0.1\n%srequire_certificate true\nuse_identity_as_username true\n",
			writeFile(t, dir, "acl", []byte(acl), 0o644), m.port, tlsListener)
	case "hivemq", "hivemq-wss", "emqx":
		pw := filepath.Join(dir, "passwd")
		mosquittoPasswd(t, pw, "pi-kitchen", "secret")
		c.readerPW = "reader-pass"
		mosquittoPasswd(t, pw, "reader", c.readerPW)
		c.files["hivemq.pass"] = writeFile(t, dir, "hivemq.pass", []byte("secret\n"), 0o600)
		c.files["emqx.pass"] = c.files["hivemq.pass"]
		c.files["emqxsl-ca.crt"] = caFile
		c.readerTL = &tls.Config{RootCAs: pool}
		conf += fmt.Sprintf("allow_anonymous false\npassword_file %s\nlistener %d 127.0.0.1\n%s", pw, m.port, tlsListener)
		if name == "hivemq-wss" {
			c.ws = freePort(t)
			conf += fmt.Sprintf("listener %d 127.0.0.1\nprotocol websockets\n%s", c.ws, tlsListener)
		}
	case "mosquitto":
		conf += fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\n", m.port)
	default:
		t.Fatalf("no cloud for the example %q", name)
	}
	c.files["system-ca.pem"] = caFile // the system's CA certificates, for SSL_CERT_FILE
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(t)
	if c.ws != 0 {
		waitListening(t, c.ws)
	}
	return c
}

// subscribe connects a reader to c, subscribed to every topic.
func (c *docCloud) subscribe(t *testing.T) <-chan paho.Message {
	t.Helper()
	got := make(chan paho.Message, 16)
	url := "tcp://" + c.addr()
	if c.readerTL != nil {
		url = "ssl://" + c.addr()
	}
	opts := testkit.PublisherOptions(url, "reader", startTimeout).SetTLSConfig(c.readerTL)
	if c.readerPW != "" {
		opts.SetUsername("reader").SetPassword(c.readerPW)
	}
	cl, err := testkit.Connect(opts, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(100) })
	waitToken(t, cl.Subscribe("#", 1, func(_ paho.Client, m paho.Message) { got <- m }))
	return got
}

// TestUplinkDocs_CloudExamples runs each cloud's example of
// docs/uplink.md, its host, port and file paths made local, against a
// Mosquitto configured as that cloud is: `cairn check-config` takes it,
// and a reading published to `cairn run` arrives at a subscriber of the
// broker on the example's topic.
func TestUplinkDocs_CloudExamples(t *testing.T) {
	bin := cairnBinary.get(t)
	blocks := docBlocks(t, "uplink.md")
	for _, tc := range []struct{ name, topic string }{
		{"aws", "dt/cairn/pi-kitchen/kitchen"},
		{"aws-443", "dt/cairn/pi-kitchen/kitchen"},
		{"hivemq", "cairn/pi-kitchen/kitchen"},
		{"hivemq-wss", "cairn/pi-kitchen/kitchen"},
		{"emqx", "cairn/pi-kitchen/kitchen"},
		{"mosquitto", "cairn/pi-kitchen/kitchen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			example, ok := blocks[tc.name]
			if !ok {
				t.Fatalf("docs/uplink.md has no block marked <!-- test: %s -->", tc.name)
			}
			cloud := startDocCloud(t, tc.name, blocks)
			got := cloud.subscribe(t)
			runDocExample(t, bin, localExample(t, example, cloud.exampleAddr(), cloud.files), cloud.files["system-ca.pem"], got, tc.topic)
		})
	}
}

// runDocExample checks the example, made local, with `cairn check-config`,
// runs `cairn run` with it (SSL_CERT_FILE caFile), publishes a reading of
// device kitchen and waits until it arrives on topic at got.
func runDocExample(t *testing.T, bin, example, caFile string, got <-chan paho.Message, topic string) {
	t.Helper()
	cfg := writeConfig(t, t.TempDir(), localConfig+example)
	env := []string{"SSL_CERT_FILE=" + caFile}
	check := exec.Command(bin, "check-config", "-config", cfg)
	check.Env = environ(env)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("cairn check-config: %v\n%s", err, out)
	}
	p := startCairnEnv(t, bin, cfg, env)
	pub := mustConnect(t, p.mqtt, "sensor")
	if err := publish1(pub, "sensors/kitchen/telemetry", `{"temperature":21.5}`); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if body := string(m.Payload()); m.Topic() != topic || !strings.Contains(body, `"id":"pi-kitchen-`) || !strings.Contains(body, `"value":21.5`) {
			t.Errorf("got %s %s, want the reading on %s", m.Topic(), body, topic)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no message in 30 s; status %+v", uplinkStatuses(t, newAPIClient(p.http)))
	}
}

// TestUplinkDocs_AzureExample runs the Azure IoT Hub example of
// docs/uplink.md against the test's hub (startAzureHub: a broker that
// checks the SAS tokens as IoT Hub does), its host, port and key file
// made local. The hub is reached by address, so the test adds
// tls.server_name with the hub's name, and SSL_CERT_FILE for its CA:
// `cairn check-config` takes it, and a reading published to `cairn run`
// arrives on the device's events topic.
func TestUplinkDocs_AzureExample(t *testing.T) {
	bin := cairnBinary.get(t)
	example, ok := docBlocks(t, "uplink.md")["azure"]
	if !ok {
		t.Fatal("docs/uplink.md has no block marked <!-- test: azure -->")
	}
	hub := startAzureHub(t, testDeviceKey)
	key := writeFile(t, t.TempDir(), "azure-device-key", []byte(testDeviceKey+"\n"), 0o600)
	example = localExample(t, example, hub.addr, map[string]string{"azure-device-key": key}) +
		"    tls:\n      server_name: " + azureHubHost + "\n"
	got := make(chan paho.Message, 16)
	opts := testkit.PublisherOptions("ssl://"+hub.addr, "reader", startTimeout).
		SetTLSConfig(hub.tlsConfig(t)).SetUsername("reader").SetPassword("reader")
	cl, err := testkit.Connect(opts, startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(100) })
	waitToken(t, cl.Subscribe("devices/+/messages/events/#", 1, func(_ paho.Client, m paho.Message) { got <- m }))

	runDocExample(t, bin, example, hub.caFile, got, "devices/"+azureDevice+"/messages/events/")
}
