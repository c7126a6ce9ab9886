package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// crashConfig runs the embedded broker; ports are picked at each start.
const crashConfig = localConfig + `store:
  # Small buckets: sealing runs all the time, so kills land in it too.
  bucket_samples: 16
`

// sensorFleet publishes messages of a few devices with strictly increasing
// times per device, and resends what was not acknowledged, like sensors
// that reconnect. One goroutine at a time may call publish.
type sensorFleet struct {
	devices int
	window  int // unacknowledged messages at most
	msgs    []sensorMessage
	acks    *ackLog
	resent  int // messages sent again because their PUBACK did not come
}

// publish connects to addr and resends the pending messages; then, if
// fresh, it sends new ones until stop is closed or the connection fails. It
// returns once every message it sent got its PUBACK or an error.
func (f *sensorFleet) publish(addr string, fresh bool, stop <-chan struct{}) error {
	w, err := testkit.ConnectWindow(addr, "crash-fleet", f.window, startTimeout, ackTimeout)
	if err != nil {
		return err
	}
	defer w.Close()
	send := func(i int) error {
		m := f.msgs[i]
		return w.Publish(m.topic(), m.payload, stop, func() { f.acks.ack(i) })
	}
	for _, i := range f.acks.pending() {
		if err := send(i); err != nil {
			return err
		}
		f.resent++
	}
	for fresh {
		i := f.acks.add()
		f.msgs = append(f.msgs, newSensorMessage(fmt.Sprintf("crash-%d", i%f.devices), t0+int64(i/f.devices), i))
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}

// TestCrash_SIGKILL kills a loaded cairn process at random moments and
// checks that no acknowledged reading is lost and none is stored twice.
// cairn has two upstreams: one takes readings throughout; the other is
// down until the last start, and keeps every reading pending across the
// kills. In the end each holds every stored reading once.
func TestCrash_SIGKILL(t *testing.T) {
	cycles := 20
	if s := os.Getenv("CAIRN_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CAIRN_CRASH_CYCLES=%q: want a positive number", s)
		}
		cycles = max(cycles, n)
	}
	bin := cairnBinary.get(t)
	dataDir := t.TempDir()
	live, late := newIdempotentVM(t), newIdempotentVM(t)
	live.start(t)
	cfg := writeConfig(t, dataDir, crashConfig+uplinkList(
		namedUpstream{"live", "influx", live.writeURL()},
		namedUpstream{"late", "influx", late.writeURL()}))
	// More devices for more cycles keep each device's readings within one
	// query when the store is checked.
	fleet := &sensorFleet{devices: 8 * ((cycles + 19) / 20), window: 32, acks: newAckLog(0)}

	var slowestStart time.Duration
	minAcked, maxAcked := math.MaxInt, 0
	for cycle := range cycles {
		ackedBefore := fleet.acks.count()
		started := time.Now()
		p := startCairn(t, bin, cfg)
		slowestStart = max(slowestStart, time.Since(started))
		if atLeast := 2 * uint64(ackedBefore); p.readings < atLeast {
			t.Fatalf("cycle %d: store holds %d readings after restart, want at least %d (every acknowledged one)\noutput:\n%s", cycle, p.readings, atLeast, p.out)
		}
		if st := uplinkStatuses(t, newAPIClient(p.http))["late"]; st.PendingReadings != p.readings {
			t.Fatalf("cycle %d: the upstream that is down has %d readings pending, want all %d stored\noutput:\n%s", cycle, st.PendingReadings, p.readings, p.out)
		}
		stop := make(chan struct{})
		stopOnce := sync.OnceFunc(func() { close(stop) })
		t.Cleanup(stopOnce) // if the test fails before the kill
		done := make(chan error, 1)
		go func() { done <- fleet.publish(p.mqtt, true, stop) }()
		load := time.NewTimer(200*time.Millisecond + rand.N(500*time.Millisecond))
		select {
		case <-load.C:
		case err := <-done:
			load.Stop()
			t.Fatalf("cycle %d: publisher stopped before the kill: %v\noutput:\n%s", cycle, err, p.out)
		}
		if err := p.signal(t, syscall.SIGKILL); err == nil {
			t.Fatalf("cycle %d: cairn exited cleanly on SIGKILL", cycle)
		}
		stopOnce()
		<-done // the connection is gone: every PUBACK or error is in
		n := fleet.acks.count() - ackedBefore
		minAcked, maxAcked = min(minAcked, n), max(maxAcked, n)
	}
	if maxAcked == 0 {
		t.Fatal("no message was acknowledged before a kill: the crashes happened without load")
	}

	// Start once more, let every sensor deliver what it still holds, and
	// stop cleanly.
	p := startCairn(t, bin, cfg)
	waitUntil(t, time.Minute, "every message to be acknowledged", func() (bool, string) {
		pending := len(fleet.acks.pending())
		if pending == 0 {
			return true, ""
		}
		if err := fleet.publish(p.mqtt, false, nil); err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("%d messages unacknowledged", pending)
	})
	// The upstream that was down comes up and takes the backlog.
	api := newAPIClient(p.http)
	late.start(t)
	waitUntil(t, 2*time.Minute, "both upstreams to take every reading", func() (bool, string) {
		st := uplinkStatuses(t, api)
		return st["live"].PendingReadings == 0 && st["late"].PendingReadings == 0, fmt.Sprintf("%+v", st)
	})
	st := api.status(t)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: got %v, want exit status 0\noutput:\n%s", err, p.out)
	}

	stored, missing, doubled := checkStored(t, dataDir, fleet.msgs, fleet.acks)
	checkAggregates(t, dataDir)
	if want := 2 * len(fleet.msgs); stored != want {
		t.Errorf("stored %d readings, want %d: every message was acknowledged in the end", stored, want)
	}
	for _, up := range []*victoriaMetrics{live, late} {
		checkUpstream(t, up, fleet.msgs, fleet.acks)
		if got, total := up.readings(t); total != stored || len(got) != stored {
			t.Errorf("upstream %s holds %d samples of %d distinct readings, want each of the %d stored once", up.base(), total, len(got), stored)
		}
	}
	t.Logf("cycles %d (%d to %d PUBACKs before each kill, restarts took up to %s), messages acknowledged %d, resent after a kill %d, readings stored %d, missing %d, doubled %d",
		cycles, minAcked, maxAcked, slowestStart.Round(time.Millisecond), fleet.acks.count(), fleet.resent, stored, missing, doubled)
	t.Logf("last run: %d readings stored again were recognised as duplicates; upstreams took %d samples (live, resent ones included) and %d (late) for %d readings",
		st.Ingest.Duplicates, live.received(t), late.received(t), stored)
}
