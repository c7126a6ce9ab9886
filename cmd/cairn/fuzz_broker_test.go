package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fuzzDurationEnv sets how long TestBroker_MalformedPackets sends bad
// packets (a Go duration; default 10s).
const fuzzDurationEnv = "CAIRN_FUZZ_DURATION"

// Raw MQTT 3.1.1 packets, built by hand so that they can be wrong.

func appendLen(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func packet(header byte, body []byte) []byte {
	return append(appendLen([]byte{header}, len(body)), body...)
}

func rawConnect(clientID, user, password string) []byte {
	flags := byte(0x02) // clean session
	if user != "" {
		flags |= 0x80 | 0x40
	}
	b := appendStr(nil, "MQTT")
	b = append(b, 4, flags, 0, 30) // level 4, keepalive 30 s
	b = appendStr(b, clientID)
	if user != "" {
		b = appendStr(b, user)
		b = appendStr(b, password)
	}
	return packet(0x10, b)
}

func rawPublish(topic string, qos byte, id uint16, payload string) []byte {
	b := appendStr(nil, topic)
	if qos > 0 {
		b = binary.BigEndian.AppendUint16(b, id)
	}
	return packet(0x30|qos<<1, append(b, payload...))
}

func rawSubscribe(id uint16, filter string) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = appendStr(b, filter)
	return packet(0x82, append(b, 1))
}

// badPackets are the kinds of malformed input the fuzz test sends after
// a CONNECT (or instead of one), by name.
var badPacketKinds = []string{
	"zero-length topic qos0", "zero-length topic qos1", "truncated qos1 publish",
	"oversized remaining length", "remaining length of 5 bytes", "65000-level topic",
	"65000-level subscription", "qos 3 publish", "reserved packet type", "random bytes",
	"mutated publish", "connect again", "bad connect", "publish before connect",
	"wildcard in topic", "unknown puback", "subscribe without filters",
}

// badPacket returns the bytes of one malformed packet of kind k.
func badPacket(r *rand.Rand, k string) []byte {
	payload := `{"t":` + strconv.Itoa(r.IntN(100)) + `}`
	switch k {
	case "zero-length topic qos0":
		return rawPublish("", 0, 0, payload)
	case "zero-length topic qos1":
		return rawPublish("", 1, uint16(r.IntN(65535)+1), payload)
	case "truncated qos1 publish":
		p := rawPublish("sensors/fuzzer/telemetry", 1, 7, payload)
		return p[:1+r.IntN(len(p)-1)]
	case "oversized remaining length":
		return append([]byte{0x30, 0xff, 0xff, 0xff, 0x7f}, "sensors/x"...)
	case "remaining length of 5 bytes":
		return []byte{0x30, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 1, 'a'}
	case "65000-level topic":
		return rawPublish(strings.Repeat("a/", 32499)+"a", 1, 9, payload)
	case "65000-level subscription":
		return rawSubscribe(11, strings.Repeat("/", 64999))
	case "qos 3 publish":
		p := rawPublish("sensors/fuzzer/telemetry", 1, 5, payload)
		p[0] |= 0x06
		return p
	case "reserved packet type":
		return []byte{[]byte{0x00, 0xf0}[r.IntN(2)], 2, 0, 0}
	case "random bytes":
		b := make([]byte, 1+r.IntN(200))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	case "mutated publish":
		p := rawPublish("sensors/fuzzer/telemetry", byte(r.IntN(2)), 3, payload)
		for range 1 + r.IntN(3) {
			p[r.IntN(len(p))] = byte(r.UintN(256))
		}
		return p
	case "connect again":
		return rawConnect("again", "fuzzer", "fuzz-pass")
	case "bad connect":
		c := rawConnect("bad", "fuzzer", "fuzz-pass")
		switch r.IntN(4) {
		case 0:
			c[4] = 'X' // protocol name
		case 1:
			c[8] = 99 // protocol level
		case 2:
			c[9] |= 0x01 // reserved flag
		default:
			c[9] |= 0x04 // will flag without a will
		}
		return c
	case "publish before connect":
		return rawPublish("sensors/fuzzer/telemetry", 1, 1, payload)
	case "wildcard in topic":
		return rawPublish("sensors/+/telemetry", 1, 2, payload)
	case "unknown puback":
		return []byte{0x40, 2, 0x12, 0x34}
	case "subscribe without filters":
		return []byte{0x82, 2, 0, 1}
	}
	panic("unknown kind " + k)
}

// rss reads VmRSS and VmHWM of a process, in KiB.
func rss(pid int) (cur, peak int64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64) // other lines are skipped
		switch k {
		case "VmRSS":
			cur = n
		case "VmHWM":
			peak = n
		}
	}
	return cur, peak, sc.Err()
}

const fuzzConfig = `
data_dir: %DATA%
mqtt:
  embedded:
    listen: "127.0.0.1:0"
    password_file: %PASSWD%
    allow_anonymous: false
    limits:
      max_clients: 500
http:
  listen: "127.0.0.1:0"
`

// TestBroker_MalformedPackets sends malformed MQTT packets to a cairn
// process over raw TCP for CAIRN_FUZZ_DURATION, then floods it with
// connections that never finish their CONNECT, while a well-behaved sensor
// keeps publishing: the process must not crash, the sensor must get every
// PUBACK and have every reading stored, and memory must stay bounded.
func TestBroker_MalformedPackets(t *testing.T) {
	duration := 10 * time.Second
	if s := os.Getenv(fuzzDurationEnv); s != "" {
		var err error
		if duration, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s: %v", fuzzDurationEnv, err)
		}
	}
	// The bound of cairn's peak RSS through the fuzzing and the CONNECT
	// flood (measured: 14 MiB idle, 35 MiB peak).
	const maxRSSKiB = 80 << 10
	bin := cairnBinary.get(t)
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	addUser(t, passwd, "kitchen", "kitchen-pass")
	addUser(t, passwd, "fuzzer", "fuzz-pass")
	cfg := writeConfig(t, t.TempDir(), strings.ReplaceAll(fuzzConfig, "%PASSWD%", passwd))
	p := startCairn(t, bin, cfg)
	pid := p.Cmd.Process.Pid
	api := newAPIClient(p.http)
	idleRSS, _, err := rss(pid)
	if err != nil {
		t.Fatal(err)
	}

	// The sensor publishes a reading every 20 ms throughout.
	sensor, err := connectAs(p.mqtt, "steady", mqttLogin{user: "kitchen", password: "kitchen-pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer sensor.Disconnect(100)
	stopSensor := make(chan struct{})
	var acked atomic.Int64
	sensorErr := make(chan error, 1)
	go func() {
		n := 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSensor:
				sensorErr <- nil
				return
			case <-tick.C:
			}
			n++ // distinct values: readings at the receive time, never equal
			if err := publish1(sensor, "sensors/kitchen/telemetry", fmt.Sprintf(`{"t":%d}`, n)); err != nil {
				sensorErr <- fmt.Errorf("after %d PUBACKs: %w", acked.Load(), err)
				return
			}
			acked.Add(1)
		}
	}()

	// Malformed packets from 4 connections at a time until the deadline.
	var packets, conns atomic.Int64
	sent := make([]atomic.Int64, len(badPacketKinds))
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; time.Now().Before(deadline); i++ {
				c, err := net.DialTimeout("tcp", p.mqtt, 5*time.Second)
				if err != nil {
					continue // the broker may be busy refusing; try again
				}
				conns.Add(1)
				var buf bytes.Buffer
				if r.IntN(8) > 0 {
					buf.Write(rawConnect(fmt.Sprintf("fuzz-%d-%d", w, i), "fuzzer", "fuzz-pass"))
					packets.Add(1)
				}
				for range 1 + r.IntN(4) {
					k := r.IntN(len(badPacketKinds))
					buf.Write(badPacket(r, badPacketKinds[k]))
					sent[k].Add(1)
					packets.Add(1)
				}
				c.SetDeadline(time.Now().Add(500 * time.Millisecond)) //nolint:errcheck // a failed write is fine too
				c.Write(buf.Bytes())                                  //nolint:errcheck // the broker may have closed it
				var scratch [512]byte
				for {
					if _, err := c.Read(scratch[:]); err != nil {
						break
					}
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	if !p.Running() {
		t.Fatalf("cairn exited during the fuzzing: %v\n%s", p.Err(), p.out)
	}

	// CONNECT flood: 3,000 connections at once, more than max_clients (500):
	// a third send nothing, a third half a CONNECT, a third a CONNECT
	// without credentials. They are held open for 3 seconds.
	var flood []net.Conn
	var floodMu sync.Mutex
	var peak int64
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				c, err := net.DialTimeout("tcp", p.mqtt, 5*time.Second)
				if err != nil {
					continue
				}
				conn := rawConnect(fmt.Sprintf("flood-%d-%d", g, i), "", "")
				switch i % 3 {
				case 1:
					c.Write(conn[:len(conn)/2]) //nolint:errcheck // may be refused already
				case 2:
					c.Write(conn) //nolint:errcheck // may be refused already
				}
				packets.Add(1)
				floodMu.Lock()
				flood = append(flood, c)
				floodMu.Unlock()
			}
		}()
	}
	wg.Wait()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, hwm, err := rss(pid)
		if err != nil {
			t.Fatalf("cairn gone during the flood: %v\n%s", err, p.out)
		}
		peak = max(peak, hwm)
	}
	for _, c := range flood {
		c.Close()
	}

	// The sensor was served throughout, and still is.
	close(stopSensor)
	if err := <-sensorErr; err != nil {
		t.Fatalf("the well-behaved sensor: %v", err)
	}
	if !p.Running() {
		t.Fatalf("cairn exited: %v\n%s", p.Err(), p.out)
	}
	if code, _, err := api.fetch("/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz: %d, %v", code, err)
	}
	var rd readingsDoc
	api.get(t, "/v1/devices/kitchen/readings?limit=10000", &rd)
	if int64(len(rd.Readings)) != acked.Load() {
		t.Errorf("kitchen: %d readings stored, %d acknowledged", len(rd.Readings), acked.Load())
	}
	if peak > maxRSSKiB {
		t.Errorf("peak RSS %d MiB, want at most %d MiB", peak>>10, maxRSSKiB>>10)
	}
	st := statusAs[refusedDoc](t, api)
	var kinds []string
	for i, k := range badPacketKinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, sent[i].Load()))
	}
	t.Logf("fuzzed %s: %d connections, %d packets (%s); CONNECT flood of %d connections; sensor got %d PUBACKs; RSS idle %d MiB, peak %d MiB; refused %d: %v",
		duration, conns.Load(), packets.Load(), strings.Join(kinds, ", "), len(flood), acked.Load(), idleRSS>>10, peak>>10, st.MQTT.Refused, st.MQTT.RefusedByReason)
}
