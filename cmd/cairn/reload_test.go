package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// steadyPublisher publishes QoS 1 messages on one topic, one after the
// other, until stopped, and counts the acknowledged ones. Message i holds
// the reading v=i at time base+i ms.
type steadyPublisher struct {
	base  int64 // epoch ms of message 0
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex // guards acked and err
	acked int
	err   error
}

func startSteadyPublisher(t *testing.T, addr, topic string) *steadyPublisher {
	t.Helper()
	c := mustConnect(t, addr, "steady")
	p := &steadyPublisher{base: time.Now().Add(-time.Hour).UnixMilli(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			err := publish1(c, topic, fmt.Sprintf(`{"ts":%d,"v":%d}`, p.base+int64(i), i))
			p.mu.Lock()
			if err != nil {
				p.err = err
				p.mu.Unlock()
				return
			}
			p.acked = i + 1
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.halt)
	return p
}

// count returns the number of messages acknowledged so far.
func (p *steadyPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// waitCount waits until n messages are acknowledged.
func (p *steadyPublisher) waitCount(t *testing.T, n int) {
	t.Helper()
	waitUntil(t, ackTimeout, fmt.Sprintf("%d acknowledged messages", n), func() (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.err != nil {
			t.Fatalf("publisher: %v", p.err)
		}
		return p.acked >= n, fmt.Sprintf("%d acknowledged", p.acked)
	})
}

// halt stops publishing and returns once the last message is settled.
func (p *steadyPublisher) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

const reloadConfigBefore = `
data_dir: %DATA%
%MQTT%
http:
  listen: "127.0.0.1:0"
mqtt:
  topics:
    - pattern: "sensors/{device}/telemetry"
      format: json
`

// reloadConfigAfter adds a topic and retention, which a reload applies,
// and a store setting, which waits for a restart.
const reloadConfigAfter = reloadConfigBefore + `    - pattern: "lab/{device}/{metric}"
      format: value
retention:
  raw_max_age: 30d
store:
  seal_idle: 2h
`

// TestReload_SIGHUPChangesTopics sends SIGHUP to a running cairn process
// after adding a topic pattern and changing retention and a store key:
// the new topic is stored from then on, retention is applied, the store
// change is logged as waiting for a restart, and a steady stream of
// messages on the old topic loses none. A bad file then changes nothing.
// It runs with the embedded broker and with Mosquitto, where the reload
// subscribes to the new topic.
func TestReload_SIGHUPChangesTopics(t *testing.T) {
	for _, mode := range []string{"embedded", "external"} {
		t.Run(mode, func(t *testing.T) {
			bin := cairnBinary.get(t)
			pubAddr := ""
			mqtt := "mqtt:\n  embedded:\n    listen: \"127.0.0.1:0\""
			if mode == "external" {
				broker := startMosquitto(t)
				pubAddr = broker.addr()
				mqtt = "mqtt:\n  url: tcp://" + broker.addr() + "\n  client_id: cairn-reload-test"
			}
			dir := t.TempDir()
			// One mqtt: section: the file's two halves are merged below.
			conf := func(s string) string {
				s = strings.Replace(s, "%MQTT%\n", "", 1)
				return strings.Replace(s, "mqtt:\n  topics:", mqtt+"\n  topics:", 1)
			}
			cfg := writeConfig(t, dir, conf(reloadConfigBefore))
			p := startCairn(t, bin, cfg)
			if pubAddr == "" {
				pubAddr = p.mqtt
			}
			api := newAPIClient(p.http)
			waitUntil(t, startTimeout, "mqtt connected", func() (bool, string) {
				st := api.status(t)
				return st.MQTT.Connected, fmt.Sprintf("%+v", st.MQTT)
			})

			pub := startSteadyPublisher(t, pubAddr, "sensors/dev1/telemetry")
			pub.waitCount(t, 20)
			probe := mustConnect(t, pubAddr, "probe")
			if err := publish1(probe, "lab/probe/temperature", "21.5"); err != nil {
				t.Fatal(err)
			}

			rewrite(t, cfg, strings.ReplaceAll(conf(reloadConfigAfter), "%DATA%", dir))
			if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			line, err := p.out.WaitLine(`msg="configuration reloaded"`, p.Exited(), startTimeout)
			if err != nil {
				t.Fatalf("%v\n%s", err, p.out)
			}
			if want := `applied="[mqtt.topics retention]"`; !strings.Contains(line, want) {
				t.Errorf("reload line %q does not say %s", line, want)
			}
			if _, err := p.out.WaitLine(`keys=[store]`, p.Exited(), time.Second); err != nil {
				t.Errorf("no line saying store waits for a restart: %v\n%s", err, p.out)
			}
			atReload := pub.count()

			if err := publish1(probe, "lab/probe/temperature", "22.5"); err != nil {
				t.Fatal(err)
			}
			waitReadings(t, api, "probe", []float64{22.5})
			pub.waitCount(t, atReload+20)
			pub.halt()
			want := make([]float64, pub.count())
			for i := range want {
				want[i] = float64(i)
			}
			waitReadings(t, api, "dev1", want)

			// A bad file is refused and changes nothing.
			rewrite(t, cfg, strings.ReplaceAll(conf(reloadConfigBefore), "%DATA%", dir)+"\nstore:\n  cache_mib: 0\n")
			if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			line, err = p.out.WaitLine(`reload: configuration not applied`, p.Exited(), startTimeout)
			if err != nil {
				t.Fatalf("%v\n%s", err, p.out)
			}
			if want := "store.cache_mib: must be from 1 to 1024 (got 0)"; !strings.Contains(line, want) {
				t.Errorf("reload error %q does not say %q", line, want)
			}
			if err := publish1(probe, "lab/probe/temperature", "23.5"); err != nil {
				t.Fatal(err)
			}
			waitReadings(t, api, "probe", []float64{22.5, 23.5})
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
			}
		})
	}
}

// waitReadings waits until device's readings, oldest first, have the
// values want.
func waitReadings(t *testing.T, api *apiClient, device string, want []float64) {
	t.Helper()
	waitUntil(t, ackTimeout, fmt.Sprintf("%d readings of %s", len(want), device), func() (bool, string) {
		var doc readingsDoc
		code := api.get(t, "/v1/devices/"+device+"/readings?order=asc&limit=10000", &doc)
		if code == http.StatusNotFound {
			return false, "no such device"
		}
		if code != http.StatusOK {
			t.Fatalf("GET readings of %s: %d", device, code)
		}
		if len(doc.Readings) > len(want) {
			t.Fatalf("%s: %d readings, want %d: %+v", device, len(doc.Readings), len(want), doc.Readings)
		}
		if len(doc.Readings) < len(want) {
			return false, fmt.Sprintf("%d readings", len(doc.Readings))
		}
		for i, r := range doc.Readings {
			if r.Value != want[i] {
				t.Fatalf("%s: reading %d is %v, want %v", device, i, r.Value, want[i])
			}
		}
		return true, ""
	})
}

// rewrite replaces the content of the file at path.
func rewrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(testDefaults(content)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNeedsRestart lists the keys whose change a reload does not apply.
func TestNeedsRestart(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"same", "", []string{}},
		{"topics", "mqtt:\n  topics:\n    - pattern: a/{device}\n", []string{}},
		{"retention", "retention:\n  raw_max_age: 30d\n", []string{}},
		{"log level", "log:\n  level: debug\n", []string{"log"}},
		{"broker", "mqtt:\n  embedded:\n    listen: 127.0.0.1:1884\n", []string{"mqtt"}},
		{"acl file", "mqtt:\n  embedded:\n    acl_file: /etc/cairn/acl\n", []string{}},
		{"http and store", "http:\n  listen: 127.0.0.1:8081\nstore:\n  cache_mib: 16\n", []string{"http", "store"}},
		{"memory and data", "memory_limit_mib: 40\ndata_dir: /var/lib/cairn\n", []string{"data_dir", "memory_limit_mib"}},
		{"uplink on", "uplink:\n  url: http://127.0.0.1:8428/write\n", []string{"uplink"}},
		{"uplink settings", "uplink:\n  batch_readings: 100\n", []string{}},
		{"keys no longer used", "store:\n  commit_interval: 2ms\n  commit_linger: 1ms\n  commit_wait_readings: 10\n", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseConfig(strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseConfig(strings.NewReader(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := needsRestart(a, b); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReload_LogsTopicEntries reloads a running cairn to presets and a
// pattern without a format: the log names each entry as the file does.
func TestReload_LogsTopicEntries(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, localConfig)
	p := startCairn(t, cairnBinary.get(t), cfg)
	rewrite(t, cfg, strings.ReplaceAll(testDefaults(`
data_dir: %DATA%
http:
  listen: "127.0.0.1:0"
mqtt:
  embedded:
    listen: "127.0.0.1:0"
  topics:
    - preset: tasmota
    - preset: zigbee2mqtt
      base_topic: z2m
    - pattern: "lab/{device}/{metric}"
      format: value
    - pattern: "sensors/{device}/telemetry"
`), "%DATA%", dir))
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line, err := p.out.WaitLine(`msg="reload: mqtt.topics applied"`, p.Exited(), startTimeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.out)
	}
	want := `topics="preset tasmota, preset zigbee2mqtt (base_topic z2m), lab/{device}/{metric} (value), sensors/{device}/telemetry (auto)"`
	if !strings.Contains(line, want) {
		t.Errorf("reload line:\n%s\nwant %s", line, want)
	}
}

// TestNeedsRestart_Upstreams: a reload applies the settings of the
// upstreams it finds by name; adding, removing, renaming or reordering
// one takes a restart.
func TestNeedsRestart_Upstreams(t *testing.T) {
	const two = "uplink:\n  - name: vm\n    url: http://127.0.0.1:8428/write\n  - name: central\n    kind: prometheus\n    url: http://127.0.0.1:9090/api/v1/write\n"
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"settings", two, strings.Replace(two, "8428/write", "8428/write\n    batch_readings: 100", 1), []string{}},
		{"url", two, strings.Replace(two, "9090", "9091", 1), []string{}},
		{"removed", two, "uplink:\n  - name: vm\n    url: http://127.0.0.1:8428/write\n", []string{"uplink"}},
		{"added", "uplink:\n  - name: vm\n    url: http://127.0.0.1:8428/write\n", two, []string{"uplink"}},
		{"renamed", two, strings.Replace(two, "central", "cloud", 1), []string{"uplink"}},
		{"block to a list", "uplink:\n  url: http://127.0.0.1:8428/write\n", "uplink:\n  - url: http://127.0.0.1:8428/write\n    gzip: false\n", []string{}},
		{"block named", "uplink:\n  url: http://127.0.0.1:8428/write\n", "uplink:\n  name: vm\n  url: http://127.0.0.1:8428/write\n", []string{"uplink"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseConfig(strings.NewReader(tc.from))
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseConfig(strings.NewReader(tc.to))
			if err != nil {
				t.Fatal(err)
			}
			if got := needsRestart(a, b); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReload_UpstreamsByName starts cairn with two upstreams, one of
// them at a URL where nothing listens; a SIGHUP that changes that URL and
// adds a third upstream reconfigures the one it changed, by name, and
// says that the third waits for a restart. The new URL refuses the
// upstream's batches as malformed: they are parked in its own folder.
func TestReload_UpstreamsByName(t *testing.T) {
	vm := newVictoriaMetrics(t)
	vm.start(t)
	dataDir := t.TempDir()
	section := func(centralURL, extra string) string {
		return localConfig + fmt.Sprintf(`uplink:
  - name: vm
    url: %s
    interval: 100ms
  - name: central
    kind: json
    url: %s
    interval: 100ms
    retry_wait_min: 100ms
    retry_wait_max: 1s
%s`, vm.writeURL(), centralURL, extra)
	}
	nowhere := fmt.Sprintf("http://127.0.0.1:%d/ingest", freePort(t))
	cfg := writeConfig(t, dataDir, section(nowhere, ""))
	p := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 5, window: 32, acks: newAckLog(0)}
	fleet.publishNew(t, p.mqtt, "dev", t0, 500)
	waitUntil(t, time.Minute, "vm to send everything and central to fail", func() (bool, string) {
		st := api.status(t)
		v, c := byName(t, st, "vm"), byName(t, st, "central")
		return v.SentReadings == 1000 && c.Failing() && c.PendingReadings == 1000, fmt.Sprintf("vm %+v, central %+v", v, c)
	})

	// central's JSON to where VictoriaMetrics takes remote write: it
	// answers 400.
	fixed := vm.base() + "/api/v1/write"
	rewrite(t, cfg, strings.ReplaceAll(section(fixed, "  - name: extra\n    url: "+vm.writeURL()+"\n"), "%DATA%", dataDir))
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`msg="reload: upstreams added or removed take effect at the next restart" component=reload added=[extra] removed=[]`,
		`msg="reload: uplink applied" component=reload upstream=central url=` + fixed,
		`msg="configuration reloaded"`,
	} {
		if _, err := p.out.WaitLine(want, p.Exited(), startTimeout); err != nil {
			t.Fatalf("no log line %s: %v\n%s", want, err, p.out)
		}
	}
	if lines := p.out.Matching(`upstream=vm`); slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "reload") }) {
		t.Errorf("vm, unchanged, was reconfigured: %q", lines)
	}
	waitUntil(t, time.Minute, "central to park its batches at the new URL", func() (bool, string) {
		c := byName(t, api.status(t), "central")
		return c.ParkedReadings == 1000 && c.PendingReadings == 0, fmt.Sprintf("%+v", c)
	})
	responses, err := filepath.Glob(filepath.Join(dataDir, "parked", "central", "*.response"))
	if err != nil || len(responses) == 0 {
		t.Errorf("parked/central/*.response: %q, %v; want central's parked batches", responses, err)
	}
	if files, err := filepath.Glob(filepath.Join(dataDir, "parked", "*.*")); err != nil || len(files) > 0 {
		t.Errorf("parked/ holds %q, %v: the folder of upstream default, which there is not", files, err)
	}
	if st := api.status(t); len(st.Uplinks) != 2 {
		t.Errorf("after the reload: %d upstreams, want 2 until a restart: %+v", len(st.Uplinks), st.Uplinks)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
}
