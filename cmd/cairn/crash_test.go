package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
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
	// newMessage makes a new message; nil: newSensorMessage.
	newMessage func(device string, ms int64, seq int) sensorMessage
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
		newMessage := f.newMessage
		if newMessage == nil {
			newMessage = newSensorMessage
		}
		f.msgs = append(f.msgs, newMessage(fmt.Sprintf("crash-%d", i%f.devices), t0+int64(i/f.devices), i))
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}

// ackedReadings returns how many readings the acknowledged messages give.
// The publisher must not run.
func (f *sensorFleet) ackedReadings() int {
	n := 0
	for i, m := range f.msgs {
		if f.acks.isAcked(i) {
			n += len(m.readings(i))
		}
	}
	return n
}

// killModes are the states of a thermostat's mode in TestCrash_SIGKILL:
// texts that JSON and line protocol escape among them, and no state word
// such as "off" (TestRun_ModesWithOff has those).
var killModes = []string{"idle", "heat", "cool", "éco ✓", `say "hi", a=b \ c`}

// killEvents are the events of a button in TestCrash_SIGKILL.
var killEvents = []string{"single", "double", "hold", "long press", "btn_down"}

// newCrashMessage is a message of a sensor that mixes texts with its
// numbers: every fourth message of a device is a button's event alone,
// at its own time; the others carry a temperature, seq and a mode. Every
// third mode is a "stage" that changes every 40 messages of the device,
// so new texts keep coming into the series' dictionary (55 at most, below
// store.max_states_per_series) while cairn is killed.
func newCrashMessage(device string, ms int64, seq int) sensorMessage {
	k := int(ms - t0) // the device's message number
	at := ms * int64(time.Millisecond)
	if k%4 == 3 {
		event := killEvents[(k/4)%len(killEvents)]
		return sensorMessage{device: device, ms: ms,
			payload: fmt.Sprintf(`{"ts":%d,"action":%s}`, ms, jsonString(event)),
			given:   []buffer.Reading{{Device: device, Metric: "action", TS: at, Text: event}}}
	}
	mode := killModes[(k/3)%len(killModes)]
	if k%3 == 0 {
		mode = fmt.Sprintf("stage %d", (k/40)%50)
	}
	m := newSensorMessage(device, ms, seq)
	m.payload = strings.TrimSuffix(m.payload, "}") + `,"mode":` + jsonString(mode) + "}"
	m.given = append(m.readings(seq), buffer.Reading{Device: device, Metric: "mode", TS: at, Text: mode})
	return m
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestCrash_SIGKILL kills a loaded cairn process at random moments and
// checks that no acknowledged reading is lost and none is stored twice,
// texts among them: each text reading is stored once, with its text and
// time. cairn has two upstreams: one, VictoriaMetrics, takes readings
// throughout (a text as the sample 0); the other, InfluxDB 1.x, is down
// until the last start, keeps every reading pending across the kills,
// and then takes each text as a string field. In the end each holds every
// stored reading once, and InfluxDB every text exactly.
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
	live, late := newIdempotentVM(t), newInfluxDB(t)
	live.start(t)
	cfg := writeConfig(t, dataDir, crashConfig+uplinkList(
		namedUpstream{"live", "influx", live.writeURL()},
		namedUpstream{"late", "influx", late.writeURL()}))
	// More devices for more cycles keep each device's readings within one
	// query when the store is checked.
	fleet := &sensorFleet{devices: 8 * ((cycles + 19) / 20), window: 32, acks: newAckLog(0), newMessage: newCrashMessage}

	var slowestStart time.Duration
	minAcked, maxAcked := math.MaxInt, 0
	for cycle := range cycles {
		ackedBefore, readingsBefore := fleet.acks.count(), fleet.ackedReadings()
		started := time.Now()
		p := startCairn(t, bin, cfg)
		slowestStart = max(slowestStart, time.Since(started))
		if atLeast := uint64(readingsBefore); p.readings < atLeast {
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
	texts := 0
	for i, m := range fleet.msgs {
		for _, r := range m.readings(i) {
			if r.IsText() {
				texts++
			}
		}
	}
	if want := len(fleet.msgs); fleet.ackedReadings() != stored || fleet.acks.count() != want {
		t.Errorf("stored %d readings, %d of %d messages acknowledged giving %d: every message was acknowledged in the end", stored, fleet.acks.count(), want, fleet.ackedReadings())
	}
	for _, up := range []upstream{live, late} {
		checkUpstream(t, up, fleet.msgs, fleet.acks)
		if got, total := up.readings(t); total != stored || len(got) != stored {
			t.Errorf("upstream %T holds %d samples of %d distinct readings, want each of the %d stored once", up, total, len(got), stored)
		}
	}
	checkUpstreamTexts(t, late, fleet.msgs, fleet.acks)
	t.Logf("cycles %d (%d to %d PUBACKs before each kill, restarts took up to %s), messages acknowledged %d, resent after a kill %d, readings stored %d (%d texts), missing %d, doubled %d",
		cycles, minAcked, maxAcked, slowestStart.Round(time.Millisecond), fleet.acks.count(), fleet.resent, stored, texts, missing, doubled)
	t.Logf("last run: %d readings stored again were recognised as duplicates; the live upstream took %d samples (resent ones included) for %d readings",
		st.Ingest.Duplicates, live.received(t), stored)
}

// checkUpstreamTexts compares the string fields InfluxDB holds with the
// text readings of the acknowledged messages: each with its exact text,
// at its time, and no other.
func checkUpstreamTexts(t *testing.T, db *influxDB, msgs []sensorMessage, acks *ackLog) {
	t.Helper()
	want := make(map[textKey]string)
	for i, m := range msgs {
		if acks.isAcked(i) {
			for k, text := range textsOf(m.readings(i)) {
				want[k] = text
			}
		}
	}
	got, _ := influxTexts(t, db)
	var wrong []string
	for k, text := range want {
		if g, ok := got[k]; !ok || g != text {
			wrong = append(wrong, fmt.Sprintf("%+v: got %q (present %v), want %q", k, g, ok, text))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%+v: got %q, no message gave it", k, g))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		t.Errorf("InfluxDB holds %d texts, want %d; %d wrong, e.g.\n%s", len(got), len(want), len(wrong), strings.Join(wrong[:min(len(wrong), 10)], "\n"))
	}
}
