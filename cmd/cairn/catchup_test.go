package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/uplink"
)

// upstreamLog sits between cairn and a real upstream and records, in
// order, the span of reading times of every batch it passes on, and
// whether the upstream took it. While the upstream is down it answers 502,
// as a proxy or load balancer in front of one would.
type upstreamLog struct {
	srv   *httptest.Server
	mu    sync.Mutex
	log   []loggedBatch
	delay time.Duration // before passing a batch on
}

type loggedBatch struct {
	taken          bool
	oldest, newest int64 // ns
	readings       int
}

func newUpstreamLog(t *testing.T, target string) *upstreamLog {
	l := &upstreamLog{}
	client := &http.Client{Timeout: 10 * time.Second}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		b := spanOf(t, body, r.Header.Get("Content-Encoding") == "gzip")
		l.mu.Lock()
		delay := l.delay
		l.mu.Unlock()
		time.Sleep(delay)
		req, err := http.NewRequest(r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			l.add(b)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		reply, _ := io.ReadAll(resp.Body)
		b.taken = resp.StatusCode < 300
		l.add(b)
		w.WriteHeader(resp.StatusCode)
		w.Write(reply)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *upstreamLog) add(b loggedBatch) {
	l.mu.Lock()
	l.log = append(l.log, b)
	l.mu.Unlock()
}

func (l *upstreamLog) setDelay(d time.Duration) {
	l.mu.Lock()
	l.delay = d
	l.mu.Unlock()
}

func (l *upstreamLog) batches() []loggedBatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedBatch(nil), l.log...)
}

// spanOf returns the span of times of a line protocol batch, two
// readings a line.
func spanOf(t *testing.T, body []byte, gz bool) loggedBatch {
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return loggedBatch{}
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Error(err)
			return loggedBatch{}
		}
	}
	b := loggedBatch{oldest: 1<<63 - 1}
	for line := range strings.SplitSeq(strings.TrimSpace(string(body)), "\n") {
		ts, err := strconv.ParseInt(line[strings.LastIndexByte(line, ' ')+1:], 10, 64)
		if err != nil {
			t.Errorf("line %q: %v", line, err)
			continue
		}
		b.oldest, b.newest = min(b.oldest, ts), max(b.newest, ts)
		b.readings += strings.Count(line[strings.IndexByte(line, ' '):], "=")
	}
	return b
}

// TestRun_LiveFirstAfterOutage stops the VictoriaMetrics a cairn with
// catch_up: live_first writes to, publishes 3,000 messages, and starts it
// again: the first batch it takes holds the newest readings, and in the
// end it holds every reading.
func TestRun_LiveFirstAfterOutage(t *testing.T) {
	vm := newVictoriaMetrics(t)
	vm.start(t)
	front := newUpstreamLog(t, vm.base())
	cfg := uplinkTo(front.srv.URL+"/write", "  catch_up: live_first\n")
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	fleet.publishNew(t, p.mqtt, "dev", t0, 100)
	waitSent(t, api)

	vm.stop(t)
	before := len(front.batches())
	fleet.publishNew(t, p.mqtt, "dev", t0, 3000)
	newest := ms(t0 + 3099)
	waitUntil(t, 30*time.Second, "the newest readings to be tried", func() (bool, string) {
		bs := front.batches()
		return bs[len(bs)-1].newest == newest, fmt.Sprintf("%d attempts", len(bs))
	})
	vm.start(t)
	waitSent(t, api)

	var after []loggedBatch
	for _, b := range front.batches()[before:] {
		if b.taken {
			after = append(after, b)
		}
	}
	// batch_readings is 500: the newest 500 readings are those of the
	// last 250 messages.
	if first := after[0]; first.oldest < ms(t0+3100-250) || first.newest != newest || first.readings != 500 {
		t.Errorf("first batch taken after the outage: %d readings from %s to %s; want the newest 500, from %s to %s",
			first.readings, msTS(first.oldest/1e6), msTS(first.newest/1e6), msTS(t0+3100-250), msTS(t0+3099))
	}
	n := 0
	for _, b := range after {
		n += b.readings
	}
	if n != 6000 {
		t.Errorf("%d readings taken after the outage, want 6000: each once", n)
	}
	checkUpstream(t, vm, fleet.msgs, fleet.acks)
	if lines := p.out.Matching("upstream gets the newest readings first"); len(lines) != 1 {
		t.Errorf("the log says %d times that the newest readings go first, want once: %q", len(lines), lines)
	}
	if _, err := p.out.WaitLine("the backlog caught up with the live stream", p.Exited(), startTimeout); err != nil {
		t.Errorf("the log does not say that the backlog caught up: %v", err)
	}
}

// TestRun_LiveFirstSurvivesSIGKILL stops the upstream of a cairn with
// catch_up: live_first, stores readings, starts it again behind a slow
// link, and kills cairn once the newest batch and a batch of the backlog
// went: started again, it sends the rest, and the upstream ends with
// every reading, none twice but those of the batch in flight at the kill.
func TestRun_LiveFirstSurvivesSIGKILL(t *testing.T) {
	vm := newVictoriaMetrics(t) // started once the readings are stored
	front := newUpstreamLog(t, vm.base())
	cfg := writeConfig(t, t.TempDir(), uplinkTo(front.srv.URL+"/write", "  catch_up: live_first\n"))
	bin := cairnBinary.get(t)
	p := startCairn(t, bin, cfg)
	fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	fleet.publishNew(t, p.mqtt, "dev", t0, 2100)
	newest := ms(t0 + 2099)
	waitUntil(t, 30*time.Second, "the newest readings to be tried", func() (bool, string) {
		bs := front.batches()
		return len(bs) > 0 && bs[len(bs)-1].newest == newest, fmt.Sprintf("%d attempts", len(bs))
	})
	front.setDelay(300 * time.Millisecond)
	vm.start(t)
	taken := func() []loggedBatch {
		var out []loggedBatch
		for _, b := range front.batches() {
			if b.taken {
				out = append(out, b)
			}
		}
		return out
	}
	waitUntil(t, 30*time.Second, "two batches to be taken", func() (bool, string) {
		n := len(taken())
		return n >= 2, fmt.Sprintf("%d taken", n)
	})
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}
	if first := taken()[0]; first.newest != newest || first.readings != 500 {
		t.Errorf("first batch after the outage: %d readings up to %s, want the newest 500, up to %s", first.readings, msTS(first.newest/1e6), msTS(t0+2099))
	}
	front.setDelay(0)
	p = startCairn(t, bin, cfg)
	waitSent(t, newAPIClient(p.http))
	checkUpstream(t, vm, fleet.msgs, fleet.acks)
	if got, total := vm.readings(t); len(got) != 4200 || total > 4200+500 {
		t.Errorf("upstream holds %d samples of %d readings, want 4200 readings, none twice but one batch of 500 at most", total, len(got))
	}
}

// TestRun_MaxBacklogDropsOldest stores readings of 2023 and of now while
// the VictoriaMetrics a cairn with max_backlog: 1h and drop_oldest writes
// to is down: the old ones are dropped, counted and logged; once it is up
// it gets the recent ones, and only those.
func TestRun_MaxBacklogDropsOldest(t *testing.T) {
	vm := newVictoriaMetrics(t) // not started yet
	cfg := uplinkTo(vm.writeURL(), "  max_backlog: 1h\n  backlog_policy: drop_oldest\n")
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(p.http)
	fleet := func(name string, first int64, n int) *sensorFleet {
		f := &sensorFleet{devices: 5, window: 64, acks: newAckLog(0)}
		f.publishNew(t, p.mqtt, name, first, n)
		return f
	}
	fleet("old", t0, 100) // 2023
	recent := fleet("new", time.Now().Add(-time.Minute).UnixMilli(), 100)
	waitUntil(t, 30*time.Second, "the old readings to be dropped", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.DroppedUnsent == 200 && st.Uplink.PendingReadings == 200, fmt.Sprintf("%+v", *st.Uplink)
	})
	line, err := p.out.WaitLine("dropped the oldest readings the upstream had not sent", p.Exited(), startTimeout)
	if err != nil || !strings.Contains(line, "level=WARN") || !strings.Contains(line, "readings=200") || !strings.Contains(line, "oldest=2023-") {
		t.Errorf("log line of the drop: %q, %v; want a warning with the count and the time span", line, err)
	}
	vm.start(t)
	if st := waitSent(t, api); st.Uplink.SentReadings != 200 || st.Uplink.DroppedUnsent != 200 {
		t.Errorf("uplink once the upstream is up: %+v, want 200 sent, 200 dropped", *st.Uplink)
	}
	checkUpstream(t, vm, recent.msgs, recent.acks)
}

// TestParseConfig_CatchUp reads catch_up and max_backlog into the
// uplink's options.
func TestParseConfig_CatchUp(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		catchUp uplink.CatchUp
		limit   buffer.BacklogLimit
	}{
		{"", uplink.OldestFirst, buffer.BacklogLimit{}},
		{"  catch_up: live_first\n  max_backlog: 7d\n  backlog_policy: drop_oldest\n", uplink.LiveFirst, buffer.BacklogLimit{MaxAge: 7 * 24 * time.Hour}},
		{"  max_backlog: 500MB\n  backlog_policy: drop_oldest\n", uplink.OldestFirst, buffer.BacklogLimit{MaxBytes: 500e6}},
		{"  max_backlog: 0\n  backlog_policy: none\n", uplink.OldestFirst, buffer.BacklogLimit{}},
	} {
		path := writeConfig(t, t.TempDir(), localConfig+"uplink:\n  url: http://127.0.0.1:8428/write\n"+tc.yaml)
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
			continue
		}
		if cfg.uplinks[0].CatchUp != tc.catchUp || cfg.uplinks[0].MaxBacklog != tc.limit {
			t.Errorf("%q: catch-up %v, max backlog %+v; want %v, %+v", tc.yaml, cfg.uplinks[0].CatchUp, cfg.uplinks[0].MaxBacklog, tc.catchUp, tc.limit)
		}
	}
}
