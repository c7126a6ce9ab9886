package main

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/uplink"
)

// threeUpstreamsSection is a list of three upstreams: vm, line protocol
// to %VM%; central, remote write to %CENTRAL%; and stuck, JSON to
// %STUCK%. Batches are small so that a backlog takes many of them.
const threeUpstreamsSection = `uplink:
  - name: vm
    url: %VM%
    gateway_id: gw-test
    batch_readings: 500
    interval: 100ms
    retry_wait_min: 100ms
    retry_wait_max: 1s
  - name: central
    kind: prometheus
    url: %CENTRAL%
    gateway_id: gw-test
    batch_readings: 500
    interval: 100ms
    retry_wait_min: 100ms
    retry_wait_max: 1s
  - name: stuck
    kind: json
    url: %STUCK%
    gateway_id: gw-test
    interval: 100ms
`

// stuckUpstream returns the URL of an upstream that takes connections
// and requests and never answers, until the test ends.
func stuckUpstream(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	done := make(chan struct{})
	held.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held.Go(func() {
				// Read what comes, so the request is sent whole, and
				// answer nothing.
				go io.Copy(io.Discard, c) //nolint:errcheck // ends when c is closed
				<-done
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		close(done)
		held.Wait()
	})
	return "http://" + ln.Addr().String() + "/ingest"
}

// byName returns the upstream name of st's uplinks, failing the test
// when there is none.
func byName(t *testing.T, st statusDoc, name string) uplink.Status {
	t.Helper()
	for _, u := range st.Uplinks {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("/v1/status has no upstream %q: %+v", name, st.Uplinks)
	return uplink.Status{}
}

// metricValue returns the value of the sample series (name and labels,
// as /metrics writes them) in the text exposition, or -1 when absent.
func metricValue(t *testing.T, metrics []byte, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(metrics)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("/metrics: %s: %v", series, err)
	}
	return v
}

// TestUplink_SeveralUpstreams has a cairn process send the readings
// published over MQTT to two real VictoriaMetrics, one by line protocol
// (vm) and one by remote write (central), and to an upstream that never
// answers (stuck). While central is stopped, vm gets every new reading as
// if neither other were there, and the status, cairn status, /metrics and
// the dashboard show each by name, central failing and stuck waiting
// with their readings pending; once central is back it gets the backlog,
// and vm and central hold every reading exactly once.
func TestUplink_SeveralUpstreams(t *testing.T) {
	vm := newVictoriaMetrics(t)
	central := vmRemoteWrite{newVictoriaMetrics(t)}
	vm.start(t)
	central.start(t)
	stuck := stuckUpstream(t)
	yaml := strings.NewReplacer("%VM%", vm.writeURL(), "%CENTRAL%", central.writeURL(), "%STUCK%", stuck).Replace(localConfig + threeUpstreamsSection)
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), yaml))
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	publish := func(ms int64, n int) {
		t.Helper()
		fleet.publishNew(t, p.mqtt, "dev", ms, n)
		if n := len(fleet.acks.pending()); n > 0 {
			t.Fatalf("%d messages not acknowledged", n)
		}
	}
	// sent waits until vm has sent want readings and has none pending,
	// and central has sent centralWant, and returns the status then.
	// stuck has sent nothing: every reading waits for it.
	sent := func(what string, want, centralWant uint64, centralPending bool) statusDoc {
		t.Helper()
		var st statusDoc
		waitUntil(t, time.Minute, what, func() (bool, string) {
			st = api.status(t)
			v, c, s := byName(t, st, "vm"), byName(t, st, "central"), byName(t, st, "stuck")
			done := v.SentReadings == want && v.PendingReadings == 0 && c.SentReadings == centralWant
			if centralPending {
				done = done && c.PendingReadings == want-centralWant && c.Failing()
			}
			if s.SentReadings != 0 || s.Failing() {
				t.Fatalf("stuck, which never answers, has sent or failed: %+v", s)
			}
			return done && s.PendingReadings == want, fmt.Sprintf("vm %+v, central %+v, stuck %+v", v, c, s)
		})
		return st
	}

	publish(t0, 1000) // 2 readings a message
	sent("both upstreams to send everything", 2000, 2000, false)

	central.stop(t) // the outage begins
	publish(t0+10_000, 1000)
	st := sent("vm to send every new reading while central fails", 4000, 2000, true)
	if len(st.Uplinks) != 3 || st.Uplinks[0].Name != "vm" || st.Uplinks[1].Name != "central" || st.Uplinks[2].Name != "stuck" || st.Uplink == nil || st.Uplink.Name != "vm" {
		t.Errorf("/v1/status: uplinks %+v, uplink %+v; want vm, central and stuck, and uplink the first", st.Uplinks, st.Uplink)
	}
	if c := byName(t, st, "central"); c.Format != "prometheus" || !strings.Contains(c.LastError, "connection refused") || c.OldestPending == nil {
		t.Errorf("central while down: %+v, want remote write, the error and the oldest pending reading", c)
	}
	out := statusText(t, p.http)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^uplink vm: influx to ` + regexp.QuoteMeta(vm.writeURL()) + `: 4000 readings in \d+ batches sent, 0 pending`),
		regexp.MustCompile(`(?m)^uplink central: prometheus to ` + regexp.QuoteMeta(central.writeURL()) + `: 2000 readings in \d+ batches sent, 2000 pending \(oldest from `),
		regexp.MustCompile(`(?m)^        last error .*connection refused`),
		regexp.MustCompile(`(?m)^uplink stuck: json to ` + regexp.QuoteMeta(stuck) + `: 0 readings in 0 batches sent, 4000 pending`),
	} {
		if !want.MatchString(out) {
			t.Errorf("cairn status lacks %s:\n%s", want, out)
		}
	}
	_, metrics, err := api.fetch("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`cairn_uplink_sent_readings_total{upstream="vm"}`:      4000,
		`cairn_uplink_pending_readings{upstream="vm"}`:         0,
		`cairn_uplink_sent_readings_total{upstream="central"}`: 2000,
		`cairn_uplink_pending_readings{upstream="central"}`:    2000,
		`cairn_uplink_pending_readings{upstream="stuck"}`:      4000,
	} {
		if got := metricValue(t, metrics, series); got != want {
			t.Errorf("/metrics: %s %v, want %v", series, got, want)
		}
	}
	if metricValue(t, metrics, `cairn_uplink_next_attempt_timestamp_seconds{upstream="central"}`) <= 0 && metricValue(t, metrics, `cairn_uplink_retries_total{upstream="central"}`) <= 0 {
		t.Errorf("/metrics: central neither retries nor waits to:\n%s", metrics)
	}
	_, health, err := api.fetch("/?part=health")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h3>Uplink vm</h3>", "<h3>Uplink central</h3>", "<h3>Uplink stuck</h3>", "the uplink central is failing: "} {
		if !strings.Contains(string(health), want) {
			t.Errorf("the dashboard lacks %q:\n%s", want, health)
		}
	}
	if strings.Contains(string(health), "the uplink vm is failing") || strings.Contains(string(health), "the uplink stuck is failing") {
		t.Errorf("the dashboard says vm is failing:\n%s", health)
	}

	central.start(t) // the outage ends
	sent("central to send its backlog", 4000, 4000, false)
	for _, up := range []struct {
		name string
		db   upstream
	}{{"vm", vm}, {"central", central}} {
		checkUpstream(t, up.db, fleet.msgs, fleet.acks)
		if got, total := up.db.readings(t); total != len(got) {
			t.Errorf("%s holds %d samples of %d readings: some twice", up.name, total, len(got))
		}
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
}
