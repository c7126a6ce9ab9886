package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// notifySocket is a fake systemd notify socket: a unixgram socket that
// keeps every message a service sends to NOTIFY_SOCKET.
type notifySocket struct {
	path string
	conn *net.UnixConn
	msgs chan string // one per datagram; closed when the socket is
	done chan struct{}
}

// listenNotify listens on a new notify socket until the test ends.
func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	// sun_path holds 108 bytes: t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "cairn-notify-")
	if err != nil {
		t.Fatal(err)
	}
	n := &notifySocket{path: filepath.Join(dir, "notify"), msgs: make(chan string, 10000), done: make(chan struct{})}
	n.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(n.done)
		defer close(n.msgs)
		buf := make([]byte, 4096)
		for {
			k, err := n.conn.Read(buf)
			if err != nil {
				return
			}
			n.msgs <- string(buf[:k])
		}
	}()
	t.Cleanup(func() {
		if err := n.conn.Close(); err != nil {
			t.Error(err)
		}
		<-n.done
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return n
}

// env returns the environment that points a service at the socket, with a
// watchdog interval of watchdog (none if 0).
func (n *notifySocket) env(watchdog time.Duration) []string {
	env := []string{"NOTIFY_SOCKET=" + n.path}
	if watchdog > 0 {
		env = append(env, "WATCHDOG_USEC="+strconv.FormatInt(watchdog.Microseconds(), 10))
	}
	return env
}

// next returns the next message, or false if none arrives within timeout.
func (n *notifySocket) next(timeout time.Duration) (string, bool) {
	select {
	case m, ok := <-n.msgs:
		return m, ok
	case <-time.After(timeout):
		return "", false
	}
}

// waitFor waits for a message that holds the line state ("READY=1") and
// returns the messages before it.
func (n *notifySocket) waitFor(t *testing.T, state string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var before []string
	for {
		m, ok := n.next(time.Until(deadline))
		if !ok {
			t.Fatalf("no %s within %s; messages before: %q", state, timeout, before)
		}
		if hasLine(m, state) {
			return before
		}
		before = append(before, m)
	}
}

// drain returns the messages received so far.
func (n *notifySocket) drain() []string {
	var out []string
	for {
		select {
		case m := <-n.msgs:
			out = append(out, m)
		default:
			return out
		}
	}
}

func hasLine(msg, line string) bool {
	for _, l := range strings.Split(msg, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

const notifyConfig = localConfig

// TestNotify_ReadyAndWatchdog runs cairn with a notify socket and a
// watchdog: READY=1 comes first, then WATCHDOG=1 at about half the
// interval, and STOPPING=1 at SIGTERM.
func TestNotify_ReadyAndWatchdog(t *testing.T) {
	bin := cairnBinary.get(t)
	sock := listenNotify(t)
	const watchdog = 400 * time.Millisecond
	cfg := writeConfig(t, t.TempDir(), notifyConfig)
	p := startCairnEnv(t, bin, cfg, sock.env(watchdog))

	if before := sock.waitFor(t, "READY=1", startTimeout); len(before) > 0 {
		t.Errorf("messages before READY=1: %q", before)
	}
	start := time.Now()
	for i := range 5 {
		if before := sock.waitFor(t, "WATCHDOG=1", 10*watchdog); len(before) > 0 {
			t.Errorf("ping %d: other messages before it: %q", i, before)
		}
	}
	// Five pings at half the interval take about 2.5 intervals; far
	// fewer would mean pings are not paced, far more that they lag.
	if took := time.Since(start); took < watchdog || took > 10*watchdog {
		t.Errorf("5 pings took %s with a watchdog of %s", took, watchdog)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
	sock.waitFor(t, "STOPPING=1", time.Second)
}

// READY=1 with an external broker that is down or refuses cairn is
// tested by checkBrokerError (external_errors_test.go).

// TestNotify_NoWatchdogWhileIngestStuck runs cairn on cutfs and stalls its
// disk's fsyncs: while a group commit waits for the disk, no watchdog ping
// is sent (so systemd would restart the service), and pings come back
// once the disk answers again.
func TestNotify_NoWatchdogWhileIngestStuck(t *testing.T) {
	testkit.RequireFUSE(t)
	bin := cairnBinary.get(t)
	mnt := mountCutfs(t)
	sock := listenNotify(t)
	const watchdog = 400 * time.Millisecond
	cfg := writeConfig(t, mnt.Dir, notifyConfig)
	p := startCairnEnv(t, bin, cfg, sock.env(watchdog))
	mnt.resumeAtCleanup(t)
	sock.waitFor(t, "READY=1", startTimeout)
	sock.waitFor(t, "WATCHDOG=1", 10*watchdog)
	c := mustConnect(t, p.mqtt, "stall-sensor")
	if err := publish1(c, "sensors/s1/telemetry", `{"t":1}`); err != nil {
		t.Fatal(err)
	}

	mnt.toggleStall(t, "cutfs: stalled")
	tok := c.Publish("sensors/s1/telemetry", 1, false, `{"t":2}`)
	if _, err := p.out.WaitLine("no longer feeding systemd's watchdog", p.Exited(), 20*watchdog); err != nil {
		t.Fatalf("%v\n%s", err, p.out)
	}
	sock.drain() // a ping that was on its way
	// Ten intervals without a ping: systemd would have restarted it.
	deadline := time.Now().Add(10 * watchdog)
	for time.Now().Before(deadline) {
		if m, ok := sock.next(time.Until(deadline)); ok {
			t.Fatalf("got %q while the disk is stalled\n%s", m, p.out)
		}
	}
	if tok.WaitTimeout(0) {
		t.Fatalf("PUBACK while the disk is stalled (err %v)", tok.Error())
	}

	mnt.toggleStall(t, "cutfs: resumed")
	if !tok.WaitTimeout(ackTimeout) || tok.Error() != nil {
		t.Fatalf("no PUBACK after the disk resumed (err %v)", tok.Error())
	}
	sock.waitFor(t, "WATCHDOG=1", 10*watchdog)
	if _, err := p.out.WaitLine("ingest is healthy again", p.Exited(), time.Second); err != nil {
		t.Errorf("%v\n%s", err, p.out)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
	mnt.Unmount(t, stopTimeout)
}

// cutfsMount is a cutfs process serving a mount for one test.
type cutfsMount struct {
	*testkit.Cutfs
	stalled bool // fsyncs wait: a process blocked in one cannot even be killed
}

// cutfsBinary is the cutfs command (scripts/cutfs).
var cutfsBinary = binaryBuild{testkit.Binary{Pkg: "../../scripts/cutfs"}}

// mountCutfs mounts a new backing directory with cutfs. The mount is gone
// when the test ends.
func mountCutfs(t *testing.T) *cutfsMount {
	t.Helper()
	base := t.TempDir()
	backing, dir := filepath.Join(base, "backing"), filepath.Join(base, "mnt")
	for _, d := range []string{backing, dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &cutfsMount{Cutfs: testkit.MountCutfs(t, cutfsBinary.get(t), backing, dir, startTimeout)}
}

// toggleStall sends cutfs SIGUSR2, which stalls or resumes fsyncs, and
// waits until it prints one more line want.
func (m *cutfsMount) toggleStall(t *testing.T, want string) {
	t.Helper()
	n := strings.Count(m.Out.String(), want)
	if err := m.Cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	m.stalled = !m.stalled
	waitUntil(t, startTimeout, want, func() (bool, string) {
		out := m.Out.String()
		return strings.Count(out, want) > n, out
	})
}

// resumeAtCleanup lets stalled fsyncs go on when the test ends, before
// the processes started earlier are killed: call it after starting them.
func (m *cutfsMount) resumeAtCleanup(t *testing.T) {
	t.Cleanup(func() {
		if m.stalled {
			if err := m.Cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				t.Error(err)
			}
		}
	})
}
