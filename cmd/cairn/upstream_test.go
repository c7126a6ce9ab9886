package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/uplink"
)

// An upstream is a real time-series database, started by the test from
// Debian's packages, that cairn's uplink writes to.
type upstream interface {
	start(t *testing.T)
	stop(t *testing.T) // stops the server cleanly
	writeURL() string
	// readings returns every sample the database holds, by series and
	// time, and how many samples it holds in all (more than the map when
	// it keeps a resent sample twice).
	readings(t *testing.T) (map[upstreamKey]float64, int)
}

// upstreamKey names one sample upstream.
type upstreamKey struct {
	gateway, device, metric string
	unit                    string // "": no unit tag
	ts                      int64  // ns
}

// program returns the path of a program the test needs. It fails the test
// when it is missing: scripts/test.sh installs it.
func program(t *testing.T, name string) string {
	t.Helper()
	for _, p := range []string{name, "/usr/bin/" + name, "/usr/sbin/" + name} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatalf("%s not found: scripts/test.sh installs it (apt-get install %s)", name, map[string]string{
		"victoria-metrics": "victoria-metrics", "influxd": "influxdb", "prometheus": "prometheus",
	}[name])
	return ""
}

// waitHTTP waits until GET u answers with want.
func waitHTTP(t *testing.T, p *process, u string, want int) {
	t.Helper()
	waitUntil(t, startTimeout, u+" to answer", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("%s exited: %v\n%s", p.Name, p.Err(), p.out)
		}
		resp, err := http.Get(u)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == want, resp.Status
	})
}

// victoriaMetrics is a VictoriaMetrics single-node server.
type victoriaMetrics struct {
	bin, dir string
	port     int
	flags    []string // more command-line flags
	p        *process
}

func newVictoriaMetrics(t *testing.T) *victoriaMetrics {
	return &victoriaMetrics{bin: program(t, "victoria-metrics"), dir: t.TempDir(), port: freePort(t)}
}

func (v *victoriaMetrics) base() string { return fmt.Sprintf("http://127.0.0.1:%d", v.port) }

func (v *victoriaMetrics) writeURL() string { return v.base() + "/write" }

func (v *victoriaMetrics) start(t *testing.T) {
	t.Helper()
	v.p = startProcess(t, v.bin, append([]string{
		"-storageDataPath=" + v.dir,
		fmt.Sprintf("-httpListenAddr=127.0.0.1:%d", v.port),
		"-retentionPeriod=100y",
		"-loggerLevel=ERROR",
		"-search.disableCache"}, v.flags...)...)
	waitHTTP(t, v.p, v.base()+"/health", http.StatusOK)
}

func (v *victoriaMetrics) stop(t *testing.T) {
	t.Helper()
	// SIGTERM: a killed VictoriaMetrics loses what it took in its last
	// second or so, before it flushed it; that would be its loss, not
	// cairn's.
	if err := v.p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("victoria-metrics: %v\n%s", err, v.p.out)
	}
}

func (v *victoriaMetrics) readings(t *testing.T) (map[upstreamKey]float64, int) {
	t.Helper()
	out := make(map[upstreamKey]float64)
	total := 0
	for _, line := range v.export(t, url.Values{"match[]": {`{__name__=~"readings_.+"}`}, "start": {"0"}}) {
		for i, ts := range line.Timestamps {
			k := upstreamKey{
				gateway: line.Metric["gateway"],
				device:  line.Metric["device"],
				unit:    line.Metric["unit"],
				metric:  strings.TrimPrefix(line.Metric["__name__"], "readings_"),
				ts:      ts * 1e6, // VictoriaMetrics keeps milliseconds
			}
			out[k] = line.Values[i]
			total++
		}
	}
	return out, total
}

// influxDB is an InfluxDB 1.x server with a database "sensors".
type influxDB struct {
	bin, dir, conf string
	port           int
	p              *process
}

func newInfluxDB(t *testing.T) *influxDB {
	db := &influxDB{bin: program(t, "influxd"), dir: t.TempDir(), port: freePort(t)}
	db.conf = filepath.Join(db.dir, "influxdb.conf")
	conf := fmt.Sprintf(`reporting-disabled = true
bind-address = "127.0.0.1:%d"
[meta]
  dir = "%[2]s/meta"
[data]
  dir = "%[2]s/data"
  wal-dir = "%[2]s/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:%[3]d"
  log-enabled = false
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
`, freePort(t), db.dir, db.port)
	if err := os.WriteFile(db.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return db
}

func (db *influxDB) base() string { return fmt.Sprintf("http://127.0.0.1:%d", db.port) }

func (db *influxDB) writeURL() string { return db.base() + "/write?db=sensors" }

func (db *influxDB) start(t *testing.T) {
	t.Helper()
	db.p = startProcess(t, db.bin, "-config", db.conf)
	waitHTTP(t, db.p, db.base()+"/ping", http.StatusNoContent)
	db.query(t, "CREATE DATABASE sensors", nil)
}

func (db *influxDB) stop(t *testing.T) {
	t.Helper()
	if err := db.p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("influxd: %v\n%s", err, db.p.out)
	}
}

// query runs an InfluxQL statement and calls fn with each series of the
// chunked answer.
func (db *influxDB) query(t *testing.T, q string, fn func(columns []string, values [][]any)) {
	t.Helper()
	resp, err := http.PostForm(db.base()+"/query", url.Values{
		"q": {q}, "db": {"sensors"}, "epoch": {"ns"}, "chunked": {"true"}, "chunk_size": {"10000"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s: %s", q, resp.Status, b)
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	dec.UseNumber()
	for {
		var doc struct {
			Results []struct {
				Error  string `json:"error"`
				Series []struct {
					Columns []string `json:"columns"`
					Values  [][]any  `json:"values"`
				} `json:"series"`
			} `json:"results"`
		}
		if err := dec.Decode(&doc); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		for _, r := range doc.Results {
			if r.Error != "" {
				t.Fatalf("%s: %s", q, r.Error)
			}
			for _, s := range r.Series {
				if fn != nil {
					fn(s.Columns, s.Values)
				}
			}
		}
	}
}

func (db *influxDB) readings(t *testing.T) (map[upstreamKey]float64, int) {
	t.Helper()
	out := make(map[upstreamKey]float64)
	total := 0
	db.query(t, "SELECT * FROM readings", func(columns []string, values [][]any) {
		for _, row := range values {
			var k upstreamKey
			fields := make(map[string]float64)
			for i, c := range columns {
				switch v := row[i].(type) {
				case json.Number:
					if c == "time" {
						ts, err := v.Int64()
						if err != nil {
							t.Fatal(err)
						}
						k.ts = ts
						continue
					}
					f, err := v.Float64()
					if err != nil {
						t.Fatal(err)
					}
					fields[c] = f
				case string:
					switch c {
					case "device":
						k.device = v
					case "gateway":
						k.gateway = v
					case "unit":
						k.unit = v
					default: // a text reading, whose value is 0
						fields[c] = 0
					}
				}
			}
			for m, f := range fields {
				k.metric = m
				out[k] = f
				total++
			}
		}
	})
	return out, total
}

// uplinkConfig is a gateway with its uplink to url; batches are small so
// that sending a backlog takes many of them.
const uplinkConfig = localConfig + uplinkSection

// uplinkSection is uplinkConfig's uplink, to %URL%.
const uplinkSection = `uplink:
  url: %URL%
  gateway_id: gw-test
  batch_readings: 500
  interval: 100ms
  retry_wait_min: 100ms
  retry_wait_max: 1s
`

// uplinkTo is uplinkConfig with its uplink to url, and the keys of extra
// (lines indented by two spaces) added to it.
func uplinkTo(url, extra string) string {
	return strings.ReplaceAll(uplinkConfig, "%URL%", url) + extra
}

func writeUplinkConfig(t *testing.T, dataDir string, up upstream) string {
	return writeConfig(t, dataDir, uplinkTo(up.writeURL(), ""))
}

// checkUpstream compares what the upstream holds with the readings of the
// acknowledged messages: every one must be there, with its value, and
// nothing else.
func checkUpstream(t *testing.T, up upstream, msgs []sensorMessage, acks *ackLog) {
	t.Helper()
	got, total := up.readings(t)
	want := make(map[upstreamKey]float64)
	for i, m := range msgs {
		if !acks.isAcked(i) {
			continue
		}
		for _, r := range m.readings(i) {
			want[upstreamKey{gateway: "gw-test", device: r.Device, metric: r.Metric, ts: r.TS}] = r.Value
		}
	}
	missing, wrong := 0, 0
	var examples []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing++
		case g != v:
			wrong++
		default:
			continue
		}
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf("%+v: want %v, got %v (present %v)", k, v, g, ok))
		}
	}
	extra := 0
	for k := range got {
		if _, ok := want[k]; !ok {
			extra++
			if len(examples) < 10 {
				examples = append(examples, fmt.Sprintf("%+v: upstream has it, no message gave it", k))
			}
		}
	}
	if missing+wrong+extra > 0 {
		sort.Strings(examples)
		t.Errorf("upstream: %d readings, want %d: %d missing, %d with another value, %d unexpected; e.g.\n%s",
			len(got), len(want), missing, wrong, extra, strings.Join(examples, "\n"))
	}
	t.Logf("upstream holds %d distinct readings of %d acknowledged messages (%d samples in all)", len(got), acks.count(), total)
}

// waitSent waits until the gateway's uplink has nothing pending.
func waitSent(t *testing.T, api *apiClient) statusDoc {
	t.Helper()
	var st statusDoc
	waitUntil(t, 2*time.Minute, "the uplink to send everything", func() (bool, string) {
		st = api.status(t)
		if st.Uplink == nil {
			t.Fatal("status has no uplink")
		}
		return st.Uplink.PendingReadings == 0, fmt.Sprintf("%+v", *st.Uplink)
	})
	return st
}

// upstreams are the databases the uplink tests write to.
var upstreams = []struct {
	name string
	new  func(t *testing.T) upstream
}{
	{"InfluxDB", func(t *testing.T) upstream { return newInfluxDB(t) }},
	{"VictoriaMetrics", func(t *testing.T) upstream { return newVictoriaMetrics(t) }},
}

// TestUplink_RealUpstreams publishes over MQTT to a cairn process whose
// uplink writes to a real InfluxDB 1.x and a real VictoriaMetrics, and
// reads every reading back through the upstream's own API.
func TestUplink_RealUpstreams(t *testing.T) {
	for _, tc := range upstreams {
		t.Run(tc.name, func(t *testing.T) {
			up := tc.new(t)
			up.start(t)
			dataDir := t.TempDir()
			p := startCairn(t, cairnBinary.get(t), writeUplinkConfig(t, dataDir, up))
			fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
			fleet.publishNew(t, p.mqtt, "dev", t0, 3000)
			if n := fleet.acks.count(); n != 3000 {
				t.Fatalf("%d of 3000 messages acknowledged", n)
			}
			api := newAPIClient(p.http)
			st := waitSent(t, api)
			_, metrics, err := api.fetch("/metrics")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`cairn_uplink_sent_readings_total{upstream="default"} 6000`, `cairn_uplink_pending_readings{upstream="default"} 0`, `cairn_uplink_parked_batches{upstream="default"} 0`} {
				if !strings.Contains(string(metrics), want+"\n") {
					t.Errorf("/metrics lacks %q", want)
				}
			}
			if st.Uplink.SentReadings != 6000 || st.Uplink.ParkedBatches != 0 || st.Uplink.SentBatches < 12 {
				t.Errorf("uplink status: %+v", *st.Uplink)
			}
			checkUpstream(t, up, fleet.msgs, fleet.acks)
			if err := p.signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("cairn: %v\n%s", err, p.out)
			}
		})
	}
}

// TestUplink_NamesAndUnitsUpstream writes readings whose device and
// metric names and units line protocol must escape straight into a store
// (ingest does not take such names yet), has the uplink send them to a
// real InfluxDB 1.x and a real VictoriaMetrics, and reads every name and
// unit back through the upstream's own API. Names that the two would read
// differently (uplink.WritableName) are skipped, not sent: InfluxDB 1.x
// refuses a whole batch with a name that ends in a backslash. A reading
// whose unit is such goes without it.
func TestUplink_NamesAndUnitsUpstream(t *testing.T) {
	type series struct {
		device, metric, unit string
		skipped              bool
	}
	all := []series{
		{"kitchen", "t", "°C", false},
		{"kitchen", "n", "", false},
		{"kitchen/door", "open", "", false},
		{"living room", "température", "°C", false},
		{"café", "débit d'eau", "m³/h", false},
		{"a,b=c", "x,y=z", "W h,=", false},
		{`say "hi"`, `the "t"`, `"`, false},
		{"#hash", "m", "1/s", false},
		{`C:\temp`, `a\b`, `µ\g`, false},
		{`end\`, "t", "", true},
		{"d", `x\,y`, "", true},
		{"d", "t", `\\`, false},
	}
	for _, tc := range upstreams {
		t.Run(tc.name, func(t *testing.T) {
			up := tc.new(t)
			up.start(t)
			dir := t.TempDir()
			s, err := buffer.Open(buffer.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			cur, err := s.Cursor(defaultUpstream)
			if err != nil {
				t.Fatal(err)
			}
			w := buffer.NewWriter(s, buffer.WriterOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			var actors sync.WaitGroup
			actors.Go(func() {
				if err := w.Run(ctx); err != nil {
					t.Error(err)
				}
			})
			want := make(map[upstreamKey]float64)
			var rs []buffer.Reading
			var skipped uint64
			for i, sr := range all {
				ts := t0*int64(time.Millisecond) + int64(i)*int64(time.Second)
				rs = append(rs, buffer.Reading{Device: sr.device, Metric: sr.metric, TS: ts, Value: float64(i) + 0.5, Unit: sr.unit})
				if sr.skipped {
					skipped++
				} else {
					unit := sr.unit
					if !uplink.WritableName(unit) {
						unit = ""
					}
					want[upstreamKey{gateway: "gw-test", device: sr.device, metric: sr.metric, unit: unit, ts: ts}] = float64(i) + 0.5
				}
			}
			done := make(chan buffer.Result, 1)
			if err := w.Submit(ctx, rs, func(r buffer.Result) { done <- r }); err != nil {
				t.Fatal(err)
			}
			if res := <-done; res.Err != nil || res.Stored != len(rs) {
				t.Fatalf("store: %+v", res)
			}
			u, err := uplink.New(cur, uplink.Options{
				URL: up.writeURL(), Gateway: "gw-test", Interval: 50 * time.Millisecond,
				RetryWaitMin: 100 * time.Millisecond, RetryWaitMax: time.Second, ParkDir: filepath.Join(dir, "parked"),
			})
			if err != nil {
				t.Fatal(err)
			}
			actors.Go(func() {
				if err := u.Run(ctx); err != nil {
					t.Error(err)
				}
			})
			waitUntil(t, time.Minute, "the uplink to send everything", func() (bool, string) {
				st := u.Status()
				if st.ParkedBatches > 0 {
					t.Fatalf("the upstream refused a batch: %+v", st)
				}
				return cur.Outbox().Pending() == 0, fmt.Sprintf("%+v", st)
			})
			cancel()
			actors.Wait()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if st := u.Status(); st.Skipped != skipped || st.SentReadings != uint64(len(want)) {
				t.Errorf("uplink status: %+v, want %d skipped and %d sent", st, skipped, len(want))
			}
			got, _ := up.readings(t)
			if !reflect.DeepEqual(got, want) {
				var lines []string
				for k, v := range got {
					lines = append(lines, fmt.Sprintf("got  %q %q %q %q %d = %v", k.gateway, k.device, k.metric, k.unit, k.ts, v))
				}
				for k, v := range want {
					lines = append(lines, fmt.Sprintf("want %q %q %q %q %d = %v", k.gateway, k.device, k.metric, k.unit, k.ts, v))
				}
				sort.Strings(lines)
				t.Errorf("upstream:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestUplink_Outage stops the upstream mid-stream, kills cairn with
// SIGKILL while the upstream is down and again while it sends the
// backlog, and checks that in the end the upstream holds exactly the
// readings stored.
func TestUplink_Outage(t *testing.T) {
	for _, tc := range upstreams {
		t.Run(tc.name, func(t *testing.T) { testOutage(t, tc.new(t)) })
	}
}

func testOutage(t *testing.T, up upstream) {
	up.start(t)
	bin := cairnBinary.get(t)
	dataDir := t.TempDir()
	cfg := writeUplinkConfig(t, dataDir, up)
	fleet := &sensorFleet{devices: 20, window: 32, acks: newAckLog(0)}

	// stream publishes to p until the returned stop function is called.
	stream := func(p *cairnProcess) func() {
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- fleet.publish(p.mqtt, true, stop) }()
		return func() {
			close(stop)
			if err := <-done; err != nil && err != errStopped {
				t.Logf("publisher: %v", err)
			}
		}
	}
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	stopPub := stream(p)
	waitUntil(t, time.Minute, "some readings sent", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.SentReadings > 2000, fmt.Sprintf("%+v", *st.Uplink)
	})
	up.stop(t) // the outage begins
	time.Sleep(time.Second)
	stopPub()
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}

	// Down upstream: cairn restarts, takes more readings, and is killed
	// again.
	p = startCairn(t, bin, cfg)
	api = newAPIClient(p.http)
	stopPub = stream(p)
	time.Sleep(time.Second)
	stopPub()
	st := api.status(t)
	if st.Uplink.PendingReadings < 2000 || st.Uplink.LastError == "" {
		t.Errorf("during the outage: %+v, want readings pending and the error", *st.Uplink)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"status", "-url", "http://" + p.http}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "pending (oldest from") || !strings.Contains(out.String(), "connection refused") {
		t.Errorf("cairn status during the outage says:\n%s", out.String())
	}
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}

	// The upstream is back: kill cairn while it sends the backlog.
	up.start(t)
	p = startCairn(t, bin, cfg)
	api = newAPIClient(p.http)
	waitUntil(t, time.Minute, "the backlog to be sending", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.SentBatches > 0, fmt.Sprintf("%+v", *st.Uplink)
	})
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}

	// Last start: sensors deliver what they still hold; everything goes up.
	p = startCairn(t, bin, cfg)
	api = newAPIClient(p.http)
	if err := fleet.publish(p.mqtt, false, nil); err != nil {
		t.Fatal(err)
	}
	st = waitSent(t, api)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
	stored, missing, doubled := checkStored(t, dataDir, fleet.msgs, fleet.acks)
	if missing+doubled > 0 {
		t.Errorf("store: %d missing, %d doubled", missing, doubled)
	}
	got, total := up.readings(t)
	if len(got) != stored {
		t.Errorf("upstream holds %d distinct readings, the store %d", len(got), stored)
	}
	checkUpstream(t, up, fleet.msgs, fleet.acks)
	t.Logf("messages acknowledged %d, readings stored %d, upstream %d distinct (%d samples, %d sent twice); last run: %+v",
		fleet.acks.count(), stored, len(got), total, total-len(got), *st.Uplink)
}

// TestUplink_ReloadFixesTheURL starts cairn with an uplink URL where
// nothing listens; a SIGHUP with the right URL sends the backlog there.
func TestUplink_ReloadFixesTheURL(t *testing.T) {
	up := newVictoriaMetrics(t)
	dataDir := t.TempDir()
	wrong := fmt.Sprintf("http://127.0.0.1:%d/write", freePort(t))
	cfgYAML := uplinkTo(wrong, "")
	cfg := writeConfig(t, dataDir, cfgYAML)
	p := startCairn(t, cairnBinary.get(t), cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 5, window: 32, acks: newAckLog(0)}
	fleet.publishNew(t, p.mqtt, "dev", t0, 500)
	waitUntil(t, time.Minute, "the wrong URL to fail", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.LastError != "" && st.Uplink.PendingReadings == 1000, fmt.Sprintf("%+v", *st.Uplink)
	})
	up.start(t)
	fixed := strings.ReplaceAll(uplinkTo(up.writeURL(), ""), "%DATA%", dataDir)
	if err := os.WriteFile(cfg, []byte(testDefaults(fixed)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := p.out.WaitLine(`msg="reload: uplink applied"`, p.Exited(), startTimeout); err != nil {
		t.Fatalf("no reload line: %v\n%s", err, p.out)
	}
	st := waitSent(t, api)
	if st.Uplink.SentReadings != 1000 {
		t.Errorf("uplink status after the reload: %+v", *st.Uplink)
	}
	checkUpstream(t, up, fleet.msgs, fleet.acks)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
}
