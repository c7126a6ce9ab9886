package testkit

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/hooks/auth"
	"github.com/cairn-gateway/cairn/third_party/mochi/listeners"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const timeout = 10 * time.Second

func TestParseStarted(t *testing.T) {
	tests := []struct {
		line    string
		want    Started
		wantErr bool
	}{
		{
			line: `time=2026-01-02T03:04:05Z level=INFO msg="cairn started" version=dev data_dir=/var/lib/cairn readings=42 max_disk_bytes=0 memory_limit_mib=0 mqtt=tcp://127.0.0.1:41883 http=127.0.0.1:48080`,
			want: Started{MQTT: "127.0.0.1:41883", HTTP: "127.0.0.1:48080", Readings: 42},
		},
		{line: `msg="cairn started" readings=0 mqtt=[::1]:1883 http=[::1]:8080`, want: Started{MQTT: "[::1]:1883", HTTP: "[::1]:8080"}},
		{line: `msg="cairn started" readings=1 http=127.0.0.1:8080`, wantErr: true},
		{line: `msg="cairn started" readings=1 mqtt=tcp://127.0.0.1:1883`, wantErr: true},
		{line: `msg="cairn started" mqtt=tcp://127.0.0.1:1883 http=127.0.0.1:8080`, wantErr: true},
		{line: `msg="cairn started" readings=99999999999999999999 mqtt=tcp://127.0.0.1:1883 http=127.0.0.1:8080`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseStarted(tt.line)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseStarted(%q): got error %v, want error %v", tt.line, err, tt.wantErr)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("ParseStarted(%q): got %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

func TestWriteConfig(t *testing.T) {
	path := WriteConfig(t, "/data/here", LocalConfig+"store:\n  bucket_samples: 16\n")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.Contains(got, "\ndata_dir: /data/here\n") || strings.Contains(got, "%DATA%") {
		t.Errorf("got %q, want data_dir: /data/here", got)
	}
	if !strings.HasSuffix(got, "http:\n  listen: \"127.0.0.1:0\"\nstore:\n  bucket_samples: 16\n") {
		t.Errorf("got %q, want the extra lines at the end", got)
	}
}

func TestProcess_Stop(t *testing.T) {
	p := StartProcess(t, nil, "sh", "-c", "echo ready; exec sleep 60")
	if _, err := p.Out.WaitLine("ready", p.Exited(), timeout); err != nil {
		t.Fatal(err)
	}
	if !p.Running() || p.Err() != nil {
		t.Fatalf("running %v, err %v: want running, no error", p.Running(), p.Err())
	}
	err := p.Stop(syscall.SIGTERM, timeout)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("Stop: got %v, want an *exec.ExitError", err)
	}
	if p.Running() || p.Err() != err {
		t.Errorf("after Stop: running %v, err %v; want exited with %v", p.Running(), p.Err(), err)
	}
	if p.Name != "sh" {
		t.Errorf("Name: got %q, want sh", p.Name)
	}
}

func TestProcess_StopQuitsAfterTimeout(t *testing.T) {
	p := StartProcess(t, nil, "sh", "-c", `trap "" TERM; trap "echo quit; exit 3" QUIT; echo ready; while :; do sleep 0.1; done`)
	if _, err := p.Out.WaitLine("ready", p.Exited(), timeout); err != nil {
		t.Fatal(err)
	}
	err := p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "SIGQUIT") {
		t.Errorf("Stop: got %v, want an error that says SIGQUIT ended it", err)
	}
	if !strings.Contains(p.Out.String(), "quit") {
		t.Errorf("output %q: SIGQUIT was not sent", p.Out.String())
	}
}

func TestProcess_StopKillsAfterTimeout(t *testing.T) {
	p := StartProcess(t, nil, "sh", "-c", `trap "" TERM QUIT; echo ready; while :; do sleep 0.1; done`)
	if _, err := p.Out.WaitLine("ready", p.Exited(), timeout); err != nil {
		t.Fatal(err)
	}
	err := p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop: got %v, want an error that says it killed", err)
	}
	if p.Running() {
		t.Error("still running after Stop")
	}
}

func TestProcess_Environment(t *testing.T) {
	p := StartProcess(t, []string{"TESTKIT_X=one"}, "sh", "-c", `echo "x=$TESTKIT_X"`)
	<-p.Exited()
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if got := p.Out.Matching("x="); len(got) != 1 || got[0] != "x=one" {
		t.Errorf("output: got %q, want x=one", got)
	}
}

func TestStartCairn(t *testing.T) {
	line := `level=INFO msg="cairn started" readings=3 mqtt=tcp://127.0.0.1:1 http=127.0.0.1:2`
	c := StartCairn(t, nil, timeout, "sh", "-c", "echo '"+line+"'; exec sleep 60")
	if want := (Started{MQTT: "127.0.0.1:1", HTTP: "127.0.0.1:2", Readings: 3}); c.Started != want {
		t.Errorf("got %+v, want %+v", c.Started, want)
	}
	if c.StartTime <= 0 {
		t.Errorf("StartTime: got %s, want > 0", c.StartTime)
	}
	if err := c.Stop(syscall.SIGKILL, timeout); err == nil {
		t.Error("Stop(SIGKILL): got nil, want an exit error")
	}
}

// startBroker runs a mochi-mqtt broker that takes every client until the
// test ends, and returns its address.
func startBroker(t *testing.T) string {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return l.Address()
}

func TestWindow(t *testing.T) {
	addr := startBroker(t)
	w, err := ConnectWindow(addr, "window", 4, timeout, timeout)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var acked atomic.Int64
	for i := range n {
		if err := w.Publish("sensors/s/telemetry", `{"t":1}`, nil, func() { acked.Add(1) }); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	w.Close()
	if got := acked.Load(); got != n {
		t.Errorf("acknowledged: got %d, want %d", got, n)
	}
}

func TestWindow_Stopped(t *testing.T) {
	addr := startBroker(t)
	w, err := ConnectWindow(addr, "window-stopped", 1, timeout, timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stop := make(chan struct{})
	close(stop)
	w.slots <- struct{}{} // the window is full
	defer func() { <-w.slots }()
	if err := w.Publish("sensors/s/telemetry", `{"t":1}`, stop, func() {}); !errors.Is(err, ErrStopped) {
		t.Errorf("got %v, want ErrStopped", err)
	}
}

func TestConnectPublisher(t *testing.T) {
	addr := startBroker(t)
	c, err := ConnectPublisher(addr, "ok", timeout)
	if err != nil {
		t.Fatal(err)
	}
	c.Disconnect(0)
	if _, err := ConnectPublisher("127.0.0.1:1", "refused", timeout); err == nil || !strings.Contains(err.Error(), "connect 127.0.0.1:1") {
		t.Errorf("got %v, want an error that names the broker", err)
	}
}
