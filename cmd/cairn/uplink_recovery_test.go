package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUplink_RecoveryIsLoggedAndErrorBecomesPast stops a real
// VictoriaMetrics under a running cairn and starts it again: while it
// is down, the status, the dashboard and cairn status show the error as
// current; once a batch has gone again, the log says the upstream takes
// batches again (after how long and how many failed attempts), and the
// error is shown as past: in the status before last_success, on the
// dashboard not red, in cairn status not at all.
func TestUplink_RecoveryIsLoggedAndErrorBecomesPast(t *testing.T) {
	vm := newVictoriaMetrics(t)
	vm.start(t)
	p := startCairn(t, cairnBinary.get(t), writeUplinkConfig(t, t.TempDir(), vm))
	api := newAPIClient(p.http)
	pub := mustConnect(t, p.mqtt, "recovery")
	ts := time.Now().Add(-time.Hour).UnixMilli()
	publish := func(n int) {
		t.Helper()
		for range n {
			ts++
			if err := publish1(pub, "sensors/kitchen/telemetry", fmt.Sprintf(`{"ts":%d,"temperature":21.5}`, ts)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(10)
	waitSent(t, api)

	vm.stop(t)
	publish(10)
	waitUntil(t, time.Minute, "the uplink to fail", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.LastError != "" && st.Uplink.Retries >= 2, fmt.Sprintf("%+v", *st.Uplink)
	})
	if lines := p.out.Matching("upstream takes batches again"); len(lines) != 0 {
		t.Fatalf("recovery logged while the upstream is down: %q", lines)
	}
	if _, health, err := api.fetch("/?part=health"); err != nil || !bytes.Contains(health, []byte(`<p class="bad">Last error`)) ||
		!bytes.Contains(health, []byte("the uplink is failing")) {
		t.Errorf("dashboard while the upstream is down: %v, want the error in red and an alert:\n%s", err, health)
	}
	if out := statusText(t, p.http); !strings.Contains(out, "        last error ") {
		t.Errorf("cairn status while the upstream is down has no last error:\n%s", out)
	}

	vm.start(t)
	st := waitSent(t, api)
	line, err := p.out.WaitLine(`msg="upstream takes batches again"`, p.Exited(), startTimeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.out)
	}
	t.Logf("%s", line)
	m := regexp.MustCompile(`failing_for=(\S+) failed_attempts=(\d+) `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("recovery line without how long and how many attempts: %s", line)
	}
	down, err := time.ParseDuration(m[1])
	attempts, _ := strconv.Atoi(m[2])
	if err != nil || down <= 0 || attempts < 2 {
		t.Errorf("recovery line: failing for %q (%v), %d failed attempts; want a duration and at least 2:\n%s", m[1], err, attempts, line)
	}
	if n := len(p.out.Matching("upstream takes batches again")); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
	u := st.Uplink
	if u.LastError == "" || u.LastErrorAt == nil || u.LastSuccess == nil || !u.LastSuccess.After(*u.LastErrorAt) || u.NextAttempt != nil {
		t.Errorf("status after recovery: %+v, want the last error kept, before last_success, and no next attempt", *u)
	}
	_, health, err := api.fetch("/?part=health")
	if err != nil || bytes.Contains(health, []byte(`<p class="bad">Last error`)) || bytes.Contains(health, []byte("the uplink is failing")) ||
		!bytes.Contains(health, []byte(`<p class="muted">Last error`)) || !bytes.Contains(health, []byte("before the last send: ")) {
		t.Errorf("dashboard after recovery: %v, want the error shown as past, not red:\n%s", err, health)
	}
	if out := statusText(t, p.http); strings.Contains(out, "last error") || !strings.Contains(out, "        last success ") {
		t.Errorf("cairn status after recovery still shows the error, or no success:\n%s", out)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
}

// statusText is what cairn status prints for the gateway at addr.
func statusText(t *testing.T, addr string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"status", "-url", "http://" + addr, "-sample", "0"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
