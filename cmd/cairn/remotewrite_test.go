package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// vmRemoteWrite is VictoriaMetrics taking Prometheus remote write.
type vmRemoteWrite struct{ *victoriaMetrics }

func (v vmRemoteWrite) writeURL() string { return v.base() + "/api/v1/write" }

// prometheusServer is a Prometheus server from Debian's package with its
// remote-write receiver on, keeping its samples for 100 years.
type prometheusServer struct {
	bin, dir string
	port     int
	p        *process
	config   string // more of prometheus.yml, such as a storage: section
}

func newPrometheus(t *testing.T) *prometheusServer {
	return &prometheusServer{bin: program(t, "prometheus"), dir: t.TempDir(), port: freePort(t)}
}

func (s *prometheusServer) base() string { return fmt.Sprintf("http://127.0.0.1:%d", s.port) }

func (s *prometheusServer) writeURL() string { return s.base() + "/api/v1/write" }

func (s *prometheusServer) start(t *testing.T) {
	t.Helper()
	cfg := filepath.Join(s.dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1h\n"+s.config), 0o644); err != nil {
		t.Fatal(err)
	}
	s.p = startProcess(t, s.bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(s.dir, "data"),
		"--storage.tsdb.retention.time=100y",
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", s.port),
		"--web.enable-remote-write-receiver",
		"--log.level=error")
	waitHTTP(t, s.p, s.base()+"/-/ready", http.StatusOK)
}

func (s *prometheusServer) stop(t *testing.T) {
	t.Helper()
	if err := s.p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("prometheus: %v\n%s", err, s.p.out)
	}
}

// readings returns the samples of every readings_* series from 3 hours
// before t0 to 1 hour after it, through the query API: a range selector
// returns the samples as they are stored.
func (s *prometheusServer) readings(t *testing.T) (map[upstreamKey]float64, int) {
	t.Helper()
	q := url.Values{
		"query": {`{__name__=~"readings_.+"}[4h]`},
		"time":  {strconv.FormatInt(t0/1000+3600, 10)},
	}
	out := make(map[upstreamKey]float64)
	total := 0
	for _, r := range s.rangeQuery(t, q) {
		for _, v := range r.samples {
			k := upstreamKey{
				gateway: r.metric["gateway"],
				device:  r.metric["device"],
				unit:    r.metric["unit"],
				metric:  strings.TrimPrefix(r.metric["__name__"], "readings_"),
				ts:      v.ms * 1e6,
			}
			out[k] = v.value
			total++
		}
	}
	return out, total
}

// remoteWriteConfig is uplinkConfig with format: prometheus.
func remoteWriteConfig(t *testing.T, dataDir string, up upstream) string {
	return writeConfig(t, dataDir, uplinkTo(up.writeURL(), "  format: prometheus\n"))
}

// publishPhase adds n messages of fleet's devices from ms on to it, publishes
// them and waits until the uplink has none pending.
func publishPhase(t *testing.T, p *cairnProcess, fleet *sensorFleet, prefix string, ms int64, n int) statusDoc {
	t.Helper()
	fleet.publishNew(t, p.mqtt, prefix, ms, n)
	if len(fleet.acks.pending()) > 0 {
		t.Fatalf("%d messages not acknowledged", len(fleet.acks.pending()))
	}
	return waitSent(t, newAPIClient(p.http))
}

// TestUplink_RemoteWriteVictoriaMetrics has a cairn process send readings
// published over MQTT as Prometheus remote write to a real
// VictoriaMetrics, and reads each back from its /api/v1/export: values,
// millisecond timestamps and labels.
func TestUplink_RemoteWriteVictoriaMetrics(t *testing.T) {
	up := vmRemoteWrite{newVictoriaMetrics(t)}
	up.start(t)
	p := startCairn(t, cairnBinary.get(t), remoteWriteConfig(t, t.TempDir(), up))
	fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	st := publishPhase(t, p, fleet, "dev", t0, 3000)
	if st.Uplink.Format != "prometheus" || st.Uplink.SentReadings != 6000 || st.Uplink.ParkedBatches != 0 || st.Uplink.SentBatches < 12 {
		t.Errorf("uplink status: %+v", *st.Uplink)
	}
	checkUpstream(t, up, fleet.msgs, fleet.acks)
}

// TestUplink_RemoteWritePrometheus has a cairn process send readings as
// remote write to a real Prometheus, reads them back through its query
// API, and then sends readings older than Prometheus takes: Prometheus
// refuses their batches with 400, the uplink parks them and counts them
// and goes on, and newer readings still arrive.
func TestUplink_RemoteWritePrometheus(t *testing.T) {
	up := newPrometheus(t)
	up.start(t)
	p := startCairn(t, cairnBinary.get(t), remoteWriteConfig(t, t.TempDir(), up))
	fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	st := publishPhase(t, p, fleet, "dev", t0, 3000)
	if st.Uplink.SentReadings != 6000 || st.Uplink.ParkedBatches != 0 {
		t.Errorf("uplink status: %+v", *st.Uplink)
	}
	checkUpstream(t, up, fleet.msgs, fleet.acks)

	// Two hours before the newest sample Prometheus holds: older than
	// its head takes.
	old := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	st = publishPhase(t, p, old, "old", t0-2*3600*1000, 300)
	if st.Uplink.ParkedReadings != 600 || st.Uplink.ParkedBatches < 2 || !strings.Contains(st.Uplink.LastError, "400") {
		t.Errorf("after too old readings, uplink status: %+v", *st.Uplink)
	}
	st = publishPhase(t, p, fleet, "dev", t0+10_000, 1000)
	if st.Uplink.SentReadings != 8000 || st.Uplink.ParkedReadings != 600 {
		t.Errorf("uplink status: %+v", *st.Uplink)
	}
	checkUpstream(t, up, fleet.msgs, fleet.acks)
}
