package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
	"github.com/cairn-gateway/cairn/uplink"
)

// The outage of TestUplink_TwoUpstreamsOneDown: the upstream is down at
// least this long, and cairn is killed twice meanwhile. Two minutes make
// three lives of cairn of 40 s each, the first longer than a request to
// the hung upstream waits (uplink.timeout, 30 s), and keep the test
// within about two and a half minutes.
const (
	outage = 2 * time.Minute
	// liveLagMax bounds the time from a PUBACK until the live upstream
	// answers a query with the reading: the uplink sends every 100 ms;
	// the rest is slack for a loaded machine.
	liveLagMax = 5 * time.Second
)

// An upstream that the test watches as readings arrive.
type probedUpstream interface {
	upstream
	// holds reports whether the upstream has the sample k.
	holds(t *testing.T, k upstreamKey) bool
}

// A countingUpstream tells how many samples it took since its process
// started, resent ones included.
type countingUpstream interface {
	received(t *testing.T) int
}

// newIdempotentVM is VictoriaMetrics made idempotent, as a fleet that
// resends runs it: a sample sent twice (the same series, time and value)
// is kept once (-dedup.minScrapeInterval=1ms).
func newIdempotentVM(t *testing.T) *victoriaMetrics {
	v := newVictoriaMetrics(t)
	v.flags = []string{"-dedup.minScrapeInterval=1ms"}
	return v
}

// holds asks VictoriaMetrics' export API, after it flushed what it took,
// whether it has the sample k.
func (v *victoriaMetrics) holds(t *testing.T, k upstreamKey) bool {
	t.Helper()
	sec := k.ts / 1e9
	q := url.Values{
		"match[]": {fmt.Sprintf(`{__name__=%q,device=%q,gateway=%q}`, "readings_"+k.metric, k.device, k.gateway)},
		"start":   {strconv.FormatInt(sec, 10)},
		"end":     {strconv.FormatInt(sec+1, 10)},
	}
	for _, line := range v.export(t, q) {
		if slices.Contains(line.Timestamps, k.ts/1e6) {
			return true
		}
	}
	return false
}

// received sums VictoriaMetrics' vm_rows_inserted_total over its
// protocols: every sample it took, resent ones included.
func (v *victoriaMetrics) received(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(v.base() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, "vm_rows_inserted_total{") {
			continue
		}
		f, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", l, err)
		}
		n += int(f)
	}
	return n
}

// holds asks Prometheus' query API whether it has the sample k.
func (s *prometheusServer) holds(t *testing.T, k upstreamKey) bool {
	t.Helper()
	q := url.Values{
		"query": {fmt.Sprintf(`readings_%s{device=%q,gateway=%q}[2s]`, k.metric, k.device, k.gateway)},
		"time":  {strconv.FormatFloat(float64(k.ts/1e6)/1000+1, 'f', 3, 64)},
	}
	for _, r := range s.rangeQuery(t, q) {
		for _, v := range r.samples {
			if v.ms == k.ts/1e6 {
				return true
			}
		}
	}
	return false
}

// pacedFleet is sensors that publish at a steady pace over one QoS 1
// connection, and resend what was not acknowledged when they reconnect.
// It records when the newest message was acknowledged.
type pacedFleet struct {
	devices, window int
	every           time.Duration // one message per
	acks            *ackLog

	mu       sync.Mutex // guards msgs, newest and newestAt
	msgs     []sensorMessage
	newest   int // the newest message acknowledged; -1: none since forget
	newestAt time.Time
}

// publish connects to addr and resends the messages not acknowledged;
// then, if fresh, it publishes new ones at the fleet's pace until stop is
// closed or the connection fails. It returns once every message it sent
// got its PUBACK or an error; nil if stop was closed.
func (f *pacedFleet) publish(addr string, fresh bool, stop <-chan struct{}) error {
	w, err := testkit.ConnectWindow(addr, "two-upstreams", f.window, startTimeout, ackTimeout)
	if err != nil {
		return err
	}
	defer w.Close()
	send := func(i int) error {
		f.mu.Lock()
		m := f.msgs[i]
		f.mu.Unlock()
		err := w.Publish(m.topic(), m.payload, stop, func() { f.acked(i) })
		if errors.Is(err, errStopped) {
			return nil
		}
		return err
	}
	for _, i := range f.acks.pending() {
		if err := send(i); err != nil {
			return err
		}
	}
	if !fresh {
		return nil
	}
	tick := time.NewTicker(f.every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		i := f.acks.add()
		f.mu.Lock()
		f.msgs = append(f.msgs, newSensorMessage(fmt.Sprintf("two-%d", i%f.devices), t0+int64(i), i))
		f.mu.Unlock()
		if err := send(i); err != nil {
			return err
		}
	}
}

func (f *pacedFleet) acked(i int) {
	f.acks.ack(i)
	f.mu.Lock()
	defer f.mu.Unlock()
	if i > f.newest {
		f.newest, f.newestAt = i, time.Now()
	}
}

// newestAcked returns the newest message acknowledged since forget, and
// when it was, or -1.
func (f *pacedFleet) newestAcked() (int, sensorMessage, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.newest < 0 {
		return -1, sensorMessage{}, time.Time{}
	}
	return f.newest, f.msgs[f.newest], f.newestAt
}

// forget makes newestAcked wait for a message acknowledged from now on.
func (f *pacedFleet) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.newest = -1
}

func (f *pacedFleet) messages() []sensorMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.msgs)
}

// streaming is a pacedFleet publishing in a goroutine until halted.
type streaming struct {
	stop chan struct{}
	done chan error
	halt func() error // stops the publisher, waits, returns what it returned
}

func (f *pacedFleet) stream(addr string) *streaming {
	s := &streaming{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() { s.done <- f.publish(addr, true, s.stop) }()
	s.halt = sync.OnceValue(func() error {
		close(s.stop)
		return <-s.done
	})
	return s
}

// uplinkList is an uplink: section listing ups, each with the settings of
// uplinkSection.
func uplinkList(ups ...namedUpstream) string {
	var b strings.Builder
	b.WriteString("uplink:\n")
	for _, u := range ups {
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n", u.name, u.kind)
		for _, l := range strings.Split(strings.TrimSpace(strings.ReplaceAll(uplinkSection, "%URL%", u.url)), "\n")[1:] {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// namedUpstream is one entry of the uplink list.
type namedUpstream struct{ name, kind, url string }

// uplinkStatuses returns the status of each upstream, by name.
func uplinkStatuses(t *testing.T, api *apiClient) map[string]uplink.Status {
	t.Helper()
	st := statusAs[struct {
		Uplinks []uplink.Status `json:"uplinks"`
	}](t, api)
	out := make(map[string]uplink.Status, len(st.Uplinks))
	for _, u := range st.Uplinks {
		out[u.Name] = u
	}
	return out
}

// TestUplink_TwoUpstreamsOneDown runs cairn with two upstreams and a
// fleet that publishes at a steady pace: one upstream is down for two
// minutes, hung at first, then stopped; meanwhile cairn is SIGKILLed
// twice and started again on its data directory. Throughout, every
// reading acknowledged reaches the live upstream within liveLagMax: it
// never waits for the dead one. Once the dead one is back, each upstream holds every acknowledged reading exactly
// once, counted by the upstream itself. The pairs run side by side: line
// protocol to VictoriaMetrics with InfluxDB 1.x down, and remote write to
// Prometheus with VictoriaMetrics' remote write down.
func TestUplink_TwoUpstreamsOneDown(t *testing.T) {
	t.Run("VictoriaMetrics+InfluxDB", func(t *testing.T) {
		t.Parallel()
		live, dead := newIdempotentVM(t), newInfluxDB(t)
		testTwoUpstreams(t,
			live, namedUpstream{"vm", "influx", live.writeURL()},
			dead, namedUpstream{"influxdb", "influx", dead.writeURL()})
	})
	t.Run("Prometheus+VictoriaMetrics", func(t *testing.T) {
		t.Parallel()
		live, dead := newPrometheus(t), vmRemoteWrite{newIdempotentVM(t)}
		testTwoUpstreams(t,
			live, namedUpstream{"prometheus", "prometheus", live.writeURL()},
			dead, namedUpstream{"vm", "prometheus", dead.writeURL()})
	})
}

func testTwoUpstreams(t *testing.T, live probedUpstream, liveEntry namedUpstream, dead upstream, deadEntry namedUpstream) {
	began := time.Now()
	live.start(t)
	dead.start(t)
	bin := cairnBinary.get(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, localConfig+uplinkList(liveEntry, deadEntry))
	// 100 messages a second, 200 readings.
	fleet := &pacedFleet{devices: 10, window: 32, every: 10 * time.Millisecond, acks: newAckLog(0), newest: -1}

	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	pub := fleet.stream(p.mqtt)
	t.Cleanup(func() { // if the test fails while it publishes
		if err := pub.halt(); err != nil {
			t.Logf("publisher: %v", err)
		}
	})
	waitUntil(t, time.Minute, "both upstreams to take readings", func() (bool, string) {
		st := uplinkStatuses(t, api)
		return st[liveEntry.name].SentReadings > 0 && st[deadEntry.name].SentReadings > 0, fmt.Sprintf("%+v", st)
	})
	warm := time.Since(began)

	// The outage: three lives of cairn, the first two ended by SIGKILL.
	// In the first the dead upstream hangs (stopped with SIGSTOP: the
	// kernel takes connections and requests, nothing answers them until
	// cairn's uplink.timeout, 30 s); from the first kill on it is gone
	// (connections refused).
	hung := upstreamProcess(t, dead)
	if err := hung.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	outageBegan := time.Now()
	var lags []time.Duration
	var deadPending uint64 // the dead upstream's backlog when cairn was last seen
	var restarts []time.Duration
	var deadErrs []string // the dead upstream's last error in each life
	for life := range 3 {
		until := outageBegan.Add(outage * time.Duration(life+1) / 3)
		lags = append(lags, probeLive(t, live, fleet, until)...)
		st := uplinkStatuses(t, api)
		d := st[deadEntry.name]
		if d.PendingReadings <= deadPending || d.LastError == "" {
			t.Errorf("life %d of the outage: %s: %+v, want more pending than %d and its error", life+1, deadEntry.name, d, deadPending)
		}
		deadPending = d.PendingReadings
		deadErrs = append(deadErrs, d.LastError)
		if life == 2 {
			break
		}
		if err := p.signal(t, syscall.SIGKILL); err == nil {
			t.Fatal("cairn exited cleanly on SIGKILL")
		}
		if err := pub.halt(); err != nil {
			t.Logf("publisher at the kill: %v", err)
		}
		if life == 0 {
			if err := hung.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			dead.stop(t)
		}
		restarted := time.Now()
		p = startCairn(t, bin, cfg)
		restarts = append(restarts, time.Since(restarted))
		api = newAPIClient(p.http)
		fleet.forget()
		pub = fleet.stream(p.mqtt)
	}
	if err := pub.halt(); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	outageTook := time.Since(outageBegan)
	published := len(fleet.messages())

	// The dead upstream comes back; the sensors deliver what they still
	// hold, and both upstreams end with everything.
	dead.start(t)
	recovered := time.Now()
	if err := fleet.publish(p.mqtt, false, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(fleet.acks.pending()); n > 0 {
		t.Fatalf("%d messages unacknowledged after they were sent again", n)
	}
	var last map[string]uplink.Status
	waitUntil(t, 2*time.Minute, "both upstreams to take the backlog", func() (bool, string) {
		last = uplinkStatuses(t, api)
		return last[liveEntry.name].PendingReadings == 0 && last[deadEntry.name].PendingReadings == 0, fmt.Sprintf("%+v", last)
	})
	catchUp := time.Since(recovered)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}

	msgs := fleet.messages()
	stored, missing, doubled := checkStored(t, dataDir, msgs, fleet.acks)
	if missing+doubled > 0 {
		t.Errorf("store: %d missing, %d doubled", missing, doubled)
	}
	want := 2 * fleet.acks.count()
	for _, u := range []struct {
		name string
		up   upstream
	}{{liveEntry.name, live}, {deadEntry.name, dead}} {
		awaitReadings(t, u.name, u.up, want, 30*time.Second)
		checkUpstream(t, u.up, msgs, fleet.acks)
		got, total := u.up.readings(t)
		if total != want || len(got) != want {
			t.Errorf("%s holds %d samples of %d distinct readings, want each of the %d acknowledged readings once", u.name, total, len(got), want)
		}
		// An idempotent upstream keeps a resent sample once: what it was
		// sent says whether more than the batch in flight at each kill
		// went twice (a batch is at most 5,000 readings).
		if c, ok := u.up.(countingUpstream); ok {
			if n := c.received(t); n > want+2*5000 {
				t.Errorf("%s was sent %d samples for %d readings: more than the batch in flight at each of the two kills went again", u.name, n, want)
			}
		}
	}
	slices.Sort(lags)
	if len(lags) == 0 {
		t.Fatal("no reading was watched arriving at the live upstream")
	}
	resent := ""
	if c, ok := live.(countingUpstream); ok {
		resent = fmt.Sprintf("; %s took %d samples in all for %d readings (the rest resent after a kill)", liveEntry.name, c.received(t), want)
	}
	t.Logf("%d messages published (%d readings stored), all acknowledged in the end; start and warm-up %s; %s down for %s, cairn killed twice (restarts took %v); "+
		"the live upstream %s showed %d watched readings a median %s and at most %s after their PUBACK; "+
		"%s's backlog at the last look %d readings, taken within %s of its return%s; whole test %s; the dead upstream's last error in each life: %q",
		published, stored, warm.Round(time.Second), deadEntry.name, outageTook.Round(time.Second), restarts,
		liveEntry.name, len(lags), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond),
		deadEntry.name, deadPending, catchUp.Round(100*time.Millisecond), resent, time.Since(began).Round(time.Second), deadErrs)
}

// upstreamProcess returns the process of an upstream the test started.
func upstreamProcess(t *testing.T, up upstream) *process {
	t.Helper()
	switch up := up.(type) {
	case *victoriaMetrics:
		return up.p
	case vmRemoteWrite:
		return up.p
	case *influxDB:
		return up.p
	case *prometheusServer:
		return up.p
	}
	t.Fatalf("no process known for %T", up)
	return nil
}

// probeLive watches, until the time given, the newest acknowledged
// message's reading arrive at the live upstream, one at a time, and fails
// the test if one takes longer than liveLagMax. It returns how long each
// took from its PUBACK.
func probeLive(t *testing.T, live probedUpstream, fleet *pacedFleet, until time.Time) []time.Duration {
	t.Helper()
	var lags []time.Duration
	for time.Now().Before(until) {
		i, m, at := fleet.newestAcked()
		if i < 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		k := upstreamKey{gateway: "gw-test", device: m.device, metric: "seq", ts: ms(m.ms)}
		for !live.holds(t, k) {
			if lag := time.Since(at); lag > liveLagMax {
				t.Fatalf("message %d, acknowledged %s ago, is not in the live upstream yet: it waited", i, lag.Round(time.Millisecond))
			}
			time.Sleep(50 * time.Millisecond)
		}
		lags = append(lags, time.Since(at))
		// Look again a moment later: the fleet needs time to publish more.
		time.Sleep(200 * time.Millisecond)
	}
	return lags
}

// awaitReadings waits until up answers with want distinct readings, or
// for d: an upstream makes what it took searchable in its own time, and
// a VictoriaMetrics just restarted, on a machine under load, once showed
// 44 of 23,752 readings right after its /internal/force_flush, all of
// which it had answered 2xx for. What it holds after d is judged as is.
func awaitReadings(t *testing.T, name string, up upstream, want int, d time.Duration) {
	t.Helper()
	began := time.Now()
	for {
		got, _ := up.readings(t)
		if len(got) >= want {
			if waited := time.Since(began); waited > time.Second {
				t.Logf("%s: %d readings searchable after %s", name, len(got), waited.Round(time.Millisecond))
			}
			return
		}
		if time.Since(began) > d {
			t.Logf("%s: %d of %d readings searchable after %s", name, len(got), want, d)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
