package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// releaseTags are the build tags of the release binaries
// (scripts/release-tags, which scripts/build-release.sh and
// scripts/binsize.sh read).
func releaseTags(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../scripts/release-tags")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), "")
}

// TestRun_ReleaseBuild: cairn built with the release's build tags (no
// ZSTD in Badger, no HTTP/2 in net/http, no profiles) stores what sensors
// send, keeps it across a restart, and serves its API and /metrics; asked
// for a profile, it refuses to start, saying why.
func TestRun_ReleaseBuild(t *testing.T) {
	tags := releaseTags(t)
	if tags == "" {
		t.Fatal("scripts/release-tags names no tag")
	}
	release := binaryBuild{testkit.Binary{Pkg: ".", Flags: []string{"-tags", tags}}}
	bin := release.get(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, testDefaults(telemetryConfig("{temp: °C}", "")))
	p := startCairn(t, bin, cfg)
	c := mustConnect(t, p.mqtt, "release")
	for _, v := range []string{"20.5", "21.5"} {
		waitToken(t, c.Publish("sensors/porch/telemetry", 1, false, `{"temp":`+v+`}`))
	}
	c.Disconnect(100)
	if _, body, err := newAPIClient(p.http).fetch("/metrics"); err != nil || !strings.Contains(string(body), "\ncairn_ingest_stored_total 2\n") {
		t.Errorf("/metrics: %v, want cairn_ingest_stored_total 2", err)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out)
	}
	p = startCairn(t, bin, cfg)
	if p.readings != 2 {
		t.Fatalf("after a restart the store holds %d readings, want 2\n%s", p.readings, p.out)
	}
	var latest struct {
		Latest map[string]struct {
			Value float64 `json:"value"`
		} `json:"latest"`
	}
	if code := newAPIClient(p.http).get(t, "/v1/devices/porch/latest", &latest); code != 200 || len(latest.Latest) != 1 || latest.Latest["temp"].Value != 21.5 {
		t.Errorf("latest: %d %+v, want 21.5", code, latest)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out)
	}
	// The release has no profiles (cairn_noprofile), and says so.
	cmd := exec.Command(bin, "run", "-config", cfg)
	cmd.Env = environ([]string{cpuProfileEnv + "=" + filepath.Join(dir, "cpu.prof")})
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "this build of cairn has no profiles") {
		t.Errorf("cairn run with %s: %v, want a refusal that says why:\n%s", cpuProfileEnv, err, out)
	}
}
