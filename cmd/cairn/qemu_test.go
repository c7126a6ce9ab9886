package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// crossBuild builds cairn for linux/goarch (with env added, such as
// GOARM) into the test's temporary directory.
func crossBuild(t *testing.T, goarch string, env ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cairn-"+goarch)
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", goarch, err, out)
	}
	return bin
}

// qemu returns the path of a qemu user-mode emulator, failing the test if
// it is missing.
func qemu(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("this test needs %s: apt-get install qemu-user (%v)", name, err)
	}
	return path
}

// TestRun_Refuses32Bit runs a linux/arm (32-bit, GOARM=7) build under
// qemu-arm: `cairn version` works, `cairn run` exits with status 69 and
// says why and what to do, without touching the data directory.
func TestRun_Refuses32Bit(t *testing.T) {
	emu := qemu(t, "qemu-arm")
	bin := crossBuild(t, "arm", "GOARM=7")

	out, err := exec.Command(emu, bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("cairn version under qemu-arm: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "linux/arm") {
		t.Errorf("cairn version: got %q, want it to name linux/arm", out)
	}

	dir := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, dir, notifyConfig)
	out, err = exec.Command(emu, bin, "run", "-config", cfg).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUnsupported {
		t.Fatalf("cairn run under qemu-arm: got %v, want exit status %d\n%s", err, exitUnsupported, out)
	}
	for _, want := range []string{"needs a 64-bit system", "32-bit build (linux/arm)", "corrupts data", "Install a 64-bit OS", "arm64 build"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cairn run says %q: want %q in it", out, want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s: got %v, want it not created", dir, err)
	}
}

// TestRun_Arm64UnderQemu runs the linux/arm64 build under qemu-aarch64:
// it starts, takes a reading in through the embedded broker, and serves
// it over HTTP.
func TestRun_Arm64UnderQemu(t *testing.T) {
	emu := qemu(t, "qemu-aarch64")
	bin := crossBuild(t, "arm64")
	cfg := writeConfig(t, t.TempDir(), notifyConfig)

	p := newCairnProcess(testkit.StartCairn(t, nil, startTimeout, emu, bin, "run", "-config", cfg))
	c := mustConnect(t, p.mqtt, "arm64-sensor")
	ts := time.Now().Add(-time.Minute).UnixMilli()
	if err := publish1(c, "sensors/pi/telemetry", fmt.Sprintf(`{"ts":%d,"temperature":21.5}`, ts)); err != nil {
		t.Fatal(err)
	}
	checkReadings(t, newAPIClient(p.http), "pi", "", []readingDoc{{Metric: "temperature", TS: msTS(ts), Value: 21.5}})
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
	if !strings.Contains(p.out.String(), `msg="cairn stopped"`) {
		t.Errorf("no clean stop:\n%s", p.out)
	}
}
