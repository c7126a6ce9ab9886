package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// textMessage is a message of a thermostat: its mode, a state that
// changes now and then, its temperature, and on some messages a button
// press (an event).
type textMessage struct {
	device  string
	ms      int64
	seq     int
	payload string
}

var (
	crashModes   = []string{"heat", "cool", "fan_only", "auto", "eco"} // not off: ON/OFF payloads are numbers
	crashActions = []string{"single", "double", "hold"}
)

func newTextMessage(device string, ms int64, seq int) textMessage {
	m := textMessage{device: device, ms: ms, seq: seq}
	m.payload = fmt.Sprintf(`{"ts":%d,"mode":%q,"temperature":%s`, ms, crashModes[(seq/20)%len(crashModes)], temperatureOf(seq))
	if seq%7 == 0 {
		m.payload += fmt.Sprintf(`,"action":%q`, crashActions[seq%len(crashActions)])
	}
	m.payload += "}"
	return m
}

func (m textMessage) topic() string { return "sensors/" + m.device + "/telemetry" }

// readings returns the readings the message gives.
func (m textMessage) readings() []buffer.Reading {
	ts := ms(m.ms)
	rs := []buffer.Reading{
		{Device: m.device, Metric: "mode", TS: ts, Text: crashModes[(m.seq/20)%len(crashModes)]},
		{Device: m.device, Metric: "temperature", TS: ts, Value: mustFloat(temperatureOf(m.seq))},
	}
	if m.seq%7 == 0 {
		rs = append(rs, buffer.Reading{Device: m.device, Metric: "action", TS: ts, Text: crashActions[m.seq%len(crashActions)]})
	}
	return rs
}

func mustFloat(s string) float64 {
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		panic(err)
	}
	return f
}

// textFleet is sensorFleet for textMessages.
type textFleet struct {
	devices int
	window  int
	msgs    []textMessage
	acks    *ackLog
	resent  int
}

// publish is sensorFleet.publish for textMessages.
func (f *textFleet) publish(addr string, fresh bool, stop <-chan struct{}) error {
	w, err := testkit.ConnectWindow(addr, "crash-texts", f.window, startTimeout, ackTimeout)
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
		f.msgs = append(f.msgs, newTextMessage(fmt.Sprintf("thermo-%d", i%f.devices), t0+int64(i/f.devices)*1000, i))
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}

// crashTextKey names a reading with its text or value.
func crashTextKey(r buffer.Reading) string {
	return fmt.Sprintf("%s|%s|%d|%q|%v", r.Device, r.Metric, r.TS, r.Text, r.Value)
}

// TestCrash_SIGKILLWithTexts is TestCrash_SIGKILL with states and events
// in the messages: a loaded cairn process, with an upstream that is down
// throughout, is killed at random moments; every acknowledged reading,
// text included, must be stored once, with its text, and be in the log
// once for the upstream, with its text.
func TestCrash_SIGKILLWithTexts(t *testing.T) {
	const cycles = 8
	bin := cairnBinary.get(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, crashConfig+uplinkList(namedUpstream{"late", "influx", fmt.Sprintf("http://127.0.0.1:%d/write", freePort(t))}))
	fleet := &textFleet{devices: 6, window: 32, acks: newAckLog(0)}
	minAcked, maxAcked := int(^uint(0)>>1), 0
	for cycle := range cycles {
		ackedBefore := fleet.acks.count()
		p := startCairn(t, bin, cfg)
		stop := make(chan struct{})
		stopOnce := sync.OnceFunc(func() { close(stop) })
		t.Cleanup(stopOnce)
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
		<-done
		n := fleet.acks.count() - ackedBefore
		minAcked, maxAcked = min(minAcked, n), max(maxAcked, n)
	}
	if maxAcked == 0 {
		t.Fatal("no message was acknowledged before a kill")
	}
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
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: got %v, want exit status 0\noutput:\n%s", err, p.out)
	}

	want := make(map[string]bool)
	texts := 0
	for _, m := range fleet.msgs {
		for _, r := range m.readings() {
			want[crashTextKey(r)] = true
			if r.Text != "" {
				texts++
			}
		}
	}
	all, counted := storedReadings(t, dataDir)
	seen := make(map[string]int)
	for _, r := range all {
		k := crashTextKey(r)
		seen[k]++
		if !want[k] {
			t.Errorf("stored reading %s was never sent", k)
		}
	}
	doubled := 0
	for k, n := range seen {
		if n > 1 {
			doubled++
			t.Errorf("reading %s stored %d times", k, n)
		}
	}
	missing := 0
	for k := range want { // every message was acknowledged in the end
		if seen[k] == 0 {
			missing++
			if missing <= 10 {
				t.Errorf("acknowledged reading %s is not stored", k)
			}
		}
	}
	if counted != uint64(len(all)) {
		t.Errorf("store counts %d readings, lists %d", counted, len(all))
	}

	// The log holds every reading once for the upstream that was down,
	// with its text.
	store, err := buffer.Open(buffer.Options{Dir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := store.Cursor("late")
	if err != nil {
		t.Fatal(err)
	}
	o := c.Outbox()
	logged, err := c.ReadOutbox(o.Cursor, int(o.Pending())+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	inLog := make(map[string]int)
	for _, r := range logged {
		inLog[crashTextKey(r.Reading)]++
	}
	for k, n := range inLog {
		if n != 1 || seen[k] != 1 {
			t.Errorf("the log holds %d of %s, the store %d", n, k, seen[k])
		}
	}
	if len(inLog) != len(seen) {
		t.Errorf("the log holds %d distinct readings, the store %d", len(inLog), len(seen))
	}
	t.Logf("cycles %d (%d to %d PUBACKs before each kill), messages %d, resent after a kill %d, readings stored %d (%d texts sent), missing %d, doubled %d, in the log %d",
		cycles, minAcked, maxAcked, len(fleet.msgs), fleet.resent, len(all), texts, missing, doubled, len(logged))
}
