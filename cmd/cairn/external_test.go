package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// mosquitto is a Mosquitto broker run by the test, on a fixed port and with
// a persistent database, so that it can be restarted with its sessions.
type mosquitto struct {
	bin, conf string
	port      int
	proc      *process
}

// startMosquitto starts a Mosquitto broker on a free port of 127.0.0.1.
func startMosquitto(t *testing.T) *mosquitto {
	t.Helper()
	bin := mosquittoBin(t)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := &mosquitto{bin: bin, conf: filepath.Join(dir, "mosquitto.conf"), port: freePort(t)}
	// user: run as ourselves even as root, so that the database in our
	// temporary directory stays writable.
	conf := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
user %s
persistence true
persistence_location %s/
autosave_interval 1
max_inflight_messages 1000
max_queued_messages 1000000
log_dest stderr
log_type error
log_type warning
log_type notice
`, m.port, u.Username, dir)
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(t)
	return m
}

// mosquittoBin returns the path of the Mosquitto broker, which is not
// on every PATH (/usr/sbin).
func mosquittoBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mosquitto"); serr != nil {
			t.Fatalf("this test needs the Mosquitto broker (%v): apt-get install mosquitto", err)
		}
		bin = "/usr/sbin/mosquitto"
	}
	return bin
}

// addr returns the broker's host:port.
func (m *mosquitto) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) }

// start starts the broker and waits until it accepts connections.
func (m *mosquitto) start(t *testing.T) {
	t.Helper()
	m.proc = startProcess(t, m.bin, "-c", m.conf)
	p := m.proc
	waitUntil(t, startTimeout, "mosquitto to accept connections", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("mosquitto exited: %v\noutput:\n%s", p.Err(), p.out)
		}
		conn, err := net.Dial("tcp", m.addr())
		if err != nil {
			return false, err.Error()
		}
		if err := conn.Close(); err != nil {
			return false, err.Error()
		}
		// Mosquitto opens its listeners before it sets its signal
		// handlers: a SIGTERM in between kills it unsaved (seen when a
		// test stopped a broker just started).
		if ok, err := catches(p.Cmd.Process.Pid, syscall.SIGTERM); !ok {
			return false, fmt.Sprintf("SIGTERM not caught yet (%v)", err)
		}
		return true, ""
	})
}

// catches reports whether process pid has a handler for sig, from the
// SigCgt mask of /proc/PID/status.
func catches(pid int, sig syscall.Signal) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && m&(1<<(uint(sig)-1)) != 0, err
		}
	}
	return false, errors.New("no SigCgt line")
}

// stop stops the broker with SIGTERM, which makes it save its database.
func (m *mosquitto) stop(t *testing.T) {
	t.Helper()
	if err := m.proc.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("mosquitto after SIGTERM: %v\noutput:\n%s", err, m.proc.out)
	}
}

// ackLog records which messages of a run got their PUBACK. It is safe for
// concurrent use.
type ackLog struct {
	mu    sync.Mutex // guards acked and n
	acked []bool
	n     int
}

func newAckLog(messages int) *ackLog { return &ackLog{acked: make([]bool, messages)} }

func (l *ackLog) ack(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.acked[i] {
		l.acked[i] = true
		l.n++
	}
}

// add records one more message, not acknowledged, and returns its index.
func (l *ackLog) add() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked = append(l.acked, false)
	return len(l.acked) - 1
}

// isAcked reports whether message i was acknowledged.
func (l *ackLog) isAcked(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked[i]
}

// count returns how many messages were acknowledged.
func (l *ackLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// pending returns the messages not acknowledged yet, in order.
func (l *ackLog) pending() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for i, ok := range l.acked {
		if !ok {
			out = append(out, i)
		}
	}
	return out
}

// sensorMessage is one message of a simulated sensor: unique time per
// device, two readings (or those given).
type sensorMessage struct {
	device  string
	ms      int64
	payload string
	// given, if not nil, is the readings the message gives, in place of
	// newSensorMessage's two.
	given []buffer.Reading
}

func newSensorMessage(device string, ms int64, seq int) sensorMessage {
	return sensorMessage{
		device:  device,
		ms:      ms,
		payload: fmt.Sprintf(`{"ts":%d,"temperature":%s,"seq":%d}`, ms, temperatureOf(seq), seq),
	}
}

// temperatureOf is the temperature a message with seq carries.
func temperatureOf(seq int) string { return strconv.FormatFloat(float64(seq%400)/10-5, 'f', 1, 64) }

func (m sensorMessage) topic() string { return "sensors/" + m.device + "/telemetry" }

// readings returns the readings the message gives.
func (m sensorMessage) readings(seq int) []buffer.Reading {
	if m.given != nil {
		return m.given
	}
	temp, err := strconv.ParseFloat(temperatureOf(seq), 64)
	if err != nil {
		panic(err)
	}
	return []buffer.Reading{
		{Device: m.device, Metric: "temperature", TS: ms(m.ms), Value: temp},
		{Device: m.device, Metric: "seq", TS: ms(m.ms), Value: float64(seq)},
	}
}

// publishPending connects to addr and publishes the messages whose index
// is in pending at QoS 1, with at most window unacknowledged, recording
// each PUBACK in acks. It returns when every message got its PUBACK or an
// error, or once stop is closed, or when the connection fails.
func publishPending(addr, clientID string, msgs []sensorMessage, pending []int, window int, acks *ackLog, stop <-chan struct{}) error {
	w, err := testkit.ConnectWindow(addr, clientID, window, startTimeout, ackTimeout)
	if err != nil {
		return err
	}
	defer w.Close()
	for _, i := range pending {
		m := msgs[i]
		err := w.Publish(m.topic(), m.payload, stop, func() { acks.ack(i) })
		if errors.Is(err, errStopped) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkStored compares the readings in a store with the messages: every
// acknowledged message's readings are there, exactly once, and nothing
// else is: each with its value, or its text. It returns how many
// readings are stored, and how many are missing and doubled.
func checkStored(t *testing.T, dir string, msgs []sensorMessage, acks *ackLog) (stored, missing, doubled int) {
	t.Helper()
	type key struct {
		device, metric string
		ts             int64
	}
	want := make(map[key]buffer.Reading) // every reading that was sent
	for i, m := range msgs {
		for _, r := range m.readings(i) {
			want[key{r.Device, r.Metric, r.TS}] = r
		}
	}
	all, counted := storedReadings(t, dir)
	seen := make(map[key]int)
	for _, r := range all {
		k := key{r.Device, r.Metric, r.TS}
		seen[k]++
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("stored reading %+v was never sent", r)
		case w.Value != r.Value || w.Text != r.Text:
			t.Errorf("stored reading %+v: got value %v text %q, want value %v text %q", r, r.Value, r.Text, w.Value, w.Text)
		}
	}
	for k, n := range seen {
		if n > 1 {
			doubled++
			t.Errorf("reading %+v stored %d times, want once", k, n)
		}
	}
	for i, m := range msgs {
		if !acks.isAcked(i) {
			continue
		}
		for _, r := range m.readings(i) {
			if seen[key{r.Device, r.Metric, r.TS}] == 0 {
				missing++
				if missing <= 10 {
					t.Errorf("acknowledged reading %+v (message %d) is not stored", r, i)
				}
			}
		}
	}
	if counted != uint64(len(all)) {
		t.Errorf("store counts %d readings, but lists %d", counted, len(all))
	}
	return len(all), missing, doubled
}

func TestRun_ExternalMosquitto(t *testing.T) {
	const (
		devices    = 5
		messages   = 5000
		window     = 100
		restartAt  = 2000 // acknowledged messages
		minBacklog = 100  // messages acknowledged by mosquitto, not yet stored by cairn
	)
	broker := startMosquitto(t)

	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  url: tcp://%s
  client_id: cairn-test-%d
  topics:
    - pattern: "sensors/{device}/telemetry"
http:
  listen: "127.0.0.1:0"
`, broker.addr(), time.Now().UnixNano()))
	d := startDaemon(t, cfg)
	api := newAPIClient(d.http)
	waitReady := func(what string) {
		waitUntil(t, startTimeout, what, func() (bool, string) {
			code, body, err := api.fetch("/readyz")
			if err != nil {
				return false, err.Error()
			}
			return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
		})
	}
	// Subscribed: from here the broker queues messages for cairn.
	waitReady("cairn to subscribe")

	msgs := make([]sensorMessage, messages)
	for i := range msgs {
		msgs[i] = newSensorMessage(fmt.Sprintf("ext-%d", i%devices), t0+int64(i/devices), i)
	}
	acks := newAckLog(messages)

	// The publisher sends what is not acknowledged yet, again and again,
	// until everything is: like a sensor, it resends after reconnecting.
	pubDone := make(chan error, 1)
	stop, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-exited
	})
	go func() {
		defer close(exited)
		deadline := time.Now().Add(2 * time.Minute)
		var last error
		for attempt := 0; ; attempt++ {
			pending := acks.pending()
			switch {
			case len(pending) == 0:
				pubDone <- nil
				return
			case time.Now().After(deadline):
				pubDone <- fmt.Errorf("%d messages still unacknowledged after %d attempts; last error: %v", len(pending), attempt, last)
				return
			}
			select {
			case <-stop:
				pubDone <- errStopped
				return
			default:
			}
			if err := publishPending(broker.addr(), "ext-publisher", msgs, pending, window, acks, stop); err != nil {
				last = err
				time.Sleep(20 * time.Millisecond) // the broker is restarting; poll again
			}
		}
	}()

	// Restart the broker mid-stream, preferably while it holds messages for
	// cairn that cairn has not stored yet: they must survive in cairn's
	// session.
	waitUntil(t, time.Minute, fmt.Sprintf("%d PUBACKs from mosquitto", restartAt), func() (bool, string) {
		n := acks.count()
		if n < restartAt {
			return false, fmt.Sprintf("%d acknowledged", n)
		}
		backlog := 2*uint64(n) - min(2*uint64(n), api.status(t).Store.Readings)
		return backlog >= 2*minBacklog || n >= 2*restartAt, fmt.Sprintf("%d acknowledged, %d readings not stored yet", n, backlog)
	})
	broker.stop(t)
	ackedAtRestart := acks.count()
	storedAtRestart := api.status(t).Store.Readings
	broker.start(t)
	if ackedAtRestart == messages {
		t.Fatalf("every message was acknowledged before the restart: the restart was not mid-stream")
	}
	backlog := (2*uint64(ackedAtRestart) - min(2*uint64(ackedAtRestart), storedAtRestart)) / 2
	t.Logf("broker restarted after %d of %d PUBACKs, with about %d acknowledged messages not yet stored by cairn", ackedAtRestart, messages, backlog)
	if backlog == 0 {
		t.Log("cairn had caught up when the broker stopped: only the publisher's resending was exercised, not cairn's queued session")
	}

	if pubErr := <-pubDone; pubErr != nil {
		t.Fatalf("publisher: %v\nmosquitto:\n%s", pubErr, broker.proc.out)
	}
	wantReadings := uint64(2 * messages)
	waitUntil(t, time.Minute, "cairn to store every acknowledged reading", func() (bool, string) {
		st := api.status(t)
		return st.Store.Readings >= wantReadings, fmt.Sprintf("%+v", st)
	})
	waitReady("cairn to be ready after the broker restart")
	st := api.status(t)
	if !st.MQTT.Connected || st.MQTT.Mode != "external" {
		t.Errorf("mqtt in /v1/status: got %+v, want connected external", st.MQTT)
	}
	t.Logf("in the end: %d readings stored, %d duplicates (redelivered), %d rejected", st.Store.Readings, st.Ingest.Duplicates, st.Ingest.Rejected)

	if err := d.stop(); err != nil {
		t.Fatalf("cairn run after cancel: got %v, want nil", err)
	}
	stored, missing, doubled := checkStored(t, dataDir, msgs, acks)
	if stored != int(wantReadings) {
		t.Errorf("stored %d readings, want %d", stored, wantReadings)
	}
	t.Logf("acknowledged messages %d, readings stored %d, missing %d, doubled %d", acks.count(), stored, missing, doubled)
}
