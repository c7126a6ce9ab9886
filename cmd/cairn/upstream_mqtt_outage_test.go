package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// sensorFeed has a sensorFleet publish a few messages to cairn every
// tick, as sensors do that keep sending whatever happens upstream: to
// the address of the cairn process running now, and again, next tick,
// those a killed cairn did not acknowledge.
type sensorFeed struct {
	fleet *sensorFleet // used by the feed's goroutine only, until stop
	addr  atomic.Value // string: cairn's MQTT address
	quit  chan struct{}
	done  chan struct{}
	fails atomic.Int64 // publishes that failed (cairn was down)
}

// startSensorFeed starts publishing perTick messages of f every tick to
// addr, from the devices prefix-*, with times a millisecond apart from
// first (ms) on.
func startSensorFeed(t *testing.T, f *sensorFleet, addr, prefix string, first int64, perTick int, tick time.Duration) *sensorFeed {
	s := &sensorFeed{fleet: f, quit: make(chan struct{}), done: make(chan struct{})}
	s.addr.Store(addr)
	go func() {
		defer close(s.done)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-tk.C:
			}
			f.queue(prefix, first, perTick)
			if err := f.publish(s.addr.Load().(string), false, s.quit); err != nil {
				s.fails.Add(1)
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// stop stops the feed and waits for it: then the fleet is the caller's.
func (s *sensorFeed) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// TestMQTTUplink_ExactlyOnceThroughLongOutage sends to the upstream
// broker of TestMQTTUplink_ExactlyOnceAcrossRestarts (TLS, a client
// certificate as the identity, an ACL) while sensors keep publishing to
// cairn: the broker stops while a backlog goes and stays down for more
// than two minutes, during which cairn's status says why and how much is
// pending and cairn is killed with SIGKILL; once the broker is back cairn
// logs that it takes batches again, and is killed once more while the
// backlog goes. Every reading acknowledged to the sensors arrives at a
// subscriber once by id; the only readings received twice are of the
// batches in flight at the stop and the kills.
func TestMQTTUplink_ExactlyOnceThroughLongOutage(t *testing.T) {
	t.Parallel() // it mostly waits for the outage to pass
	const outage = 2*time.Minute + 5*time.Second
	bin := cairnBinary.get(t)
	cloud := startMQTTCloud(t, "")
	sink := cloud.subscribe(t)
	const maxBytes = 4096
	// A byte rate keeps a backlog going for some seconds, so that the
	// broker's stop and the second kill find batches in flight.
	cfg := writeConfig(t, t.TempDir(), localConfig+cloud.entry(fmt.Sprintf("    max_message_bytes: %d\n    inflight: 4\n    max_bytes_per_second: 128KiB\n", maxBytes)))
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 4, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 3000)
	waitUntil(t, time.Minute, "1,500 readings at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		return ids >= 1500, fmt.Sprintf("%d ids, %d readings", ids, got)
	})
	// 10 messages (20 readings) every 100 ms from here on: about 5,000
	// readings over the outage.
	feed := startSensorFeed(t, fleet, p.mqtt, "dev", t0, 10, 100*time.Millisecond)
	if st := uplinkStatuses(t, api)["cloud"]; st.PendingReadings == 0 {
		t.Fatalf("the backlog went before the broker stopped: %+v", st)
	}
	cloud.stop(t)
	down := time.Now()

	// The outage: status says why, and that the backlog grows.
	var pending uint64
	waitUntil(t, time.Minute, "status to say the broker is down", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		pending = st.PendingReadings
		return st.Failing() && strings.Contains(st.LastError, "connection refused") && st.PendingReadings > 0, fmt.Sprintf("%+v", st)
	})
	checkOutageStatus(t, bin, p, pending)
	waitUntil(t, time.Minute, "the backlog to grow while the broker is down", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return st.Failing() && st.PendingReadings >= pending+400, fmt.Sprintf("%d pending before, %+v", pending, st)
	})

	// The first kill, with the broker down and sensors publishing.
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}
	p = startCairn(t, bin, cfg)
	feed.addr.Store(p.mqtt)
	api = newAPIClient(p.http)
	waitUntil(t, time.Minute, "the restarted cairn to say the broker is down", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		pending = st.PendingReadings
		return st.Failing() && strings.Contains(st.LastError, "connection refused") && st.PendingReadings > 0, fmt.Sprintf("%+v", st)
	})
	checkOutageStatus(t, bin, p, pending)
	waitUntil(t, outage+time.Minute, "the outage to last its time", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		if st.SentReadings > 0 || !st.Failing() {
			t.Fatalf("cairn sent readings with the broker down: %+v", st)
		}
		return time.Since(down) >= outage, fmt.Sprintf("down for %s, %d pending", time.Since(down).Round(time.Second), st.PendingReadings)
	})
	idsDown, _ := sink.counts()

	// The broker back: cairn says so, and is killed again while the
	// backlog goes.
	cloud.start(t)
	if _, err := p.out.WaitLine(`msg="upstream takes batches again"`, p.Exited(), time.Minute); err != nil {
		t.Fatalf("no log line that the upstream takes batches again: %v\n%s", err, p.out)
	}
	waitUntil(t, time.Minute, "1,000 readings more at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		return ids >= idsDown+1000, fmt.Sprintf("%d ids, %d readings", ids, got)
	})
	if st := uplinkStatuses(t, api)["cloud"]; st.PendingReadings == 0 {
		t.Fatalf("the backlog went before the second kill: %+v", st)
	}
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("cairn exited cleanly on SIGKILL")
	}
	p = startCairn(t, bin, cfg)
	feed.addr.Store(p.mqtt)
	api = newAPIClient(p.http)
	// The sensors stop; what the kills left unacknowledged goes again.
	feed.stop()
	fleet.publishNew(t, p.mqtt, "dev", t0, 0)
	want := 2 * fleet.acks.count()
	waitUntil(t, 2*time.Minute, "every reading at the subscriber", func() (bool, string) {
		ids, got := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids >= want && st.PendingReadings == 0, fmt.Sprintf("%d ids of %d, %d readings; status %+v", ids, want, got, st)
	})
	sink.check(t, fleet.msgs, fleet.acks, maxBytes)
	ids, got := sink.counts()
	// Two batches may go again, 500 readings at most each: the one in
	// flight when the broker stopped (after the first kill the restarted
	// cairn sends it whole, what the broker took before it stopped
	// included) and the one in flight at the second kill. The first kill
	// adds none: nothing goes while the broker is down.
	sink.checkResent(t, 2, 500)
	t.Logf("%d readings once each, %d received in all, broker down for %s; the sensors' connections failed %d times at the kills",
		ids, got, outage, feed.fails.Load())
}

// uplinkPendingRE finds the pending count of upstream cloud in cairn
// status.
var uplinkPendingRE = regexp.MustCompile(`uplink cloud: json to mqtts://[^ ]+: .* (\d+) pending`)

// checkOutageStatus checks that cairn status says of upstream cloud
// that it is failing, why, and at least pending readings pending.
func checkOutageStatus(t *testing.T, bin string, p *cairnProcess, pending uint64) {
	t.Helper()
	out, err := exec.Command(bin, "status", "-sample", "0", "-url", "http://"+p.http).CombinedOutput()
	if err != nil {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	m := uplinkPendingRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("cairn status does not say what upstream cloud has pending:\n%s", out)
	}
	if n, err := strconv.ParseUint(string(m[1]), 10, 64); err != nil || n < pending {
		t.Errorf("cairn status says %s pending, want at least %d:\n%s", m[1], pending, out)
	}
	if !regexp.MustCompile(`last error [^ ]+: connect to mqtts://127\.0\.0\.1:\d+: .*connection refused`).Match(out) {
		t.Errorf("cairn status does not say that the broker refuses connections:\n%s", out)
	}
}
