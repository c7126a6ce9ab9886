package main

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestUplink_MaxBytesPerSecond builds a backlog in a cairn process
// whose upstream is down, then brings the upstream up, a real
// VictoriaMetrics behind a proxy that counts the bytes of the bodies it
// gets: the backlog drains at uplink.max_bytes_per_second, within 10 %,
// measured from the first request to the last over about a minute, with
// batches bigger than the bucket's second; and every reading arrives.
func TestUplink_MaxBytesPerSecond(t *testing.T) {
	const (
		bps      = 2000  // bytes a second
		messages = 13500 // 27,000 readings, about 4.6 bytes each gzipped: a minute at the cap
	)
	vm := newVictoriaMetrics(t)
	vm.start(t)
	proxy := newRecordingProxy(t, vm.base())
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := uplinkTo("http://"+addr+"/write", "  max_bytes_per_second: "+strconv.Itoa(bps)+"\n")
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 10, window: 64, acks: newAckLog(0)}
	fleet.publishNew(t, p.mqtt, "dev", t0, messages)
	waitUntil(t, time.Minute, "the backlog to wait for the upstream", func() (bool, string) {
		st := api.status(t)
		return st.Uplink.PendingReadings == 2*messages && st.Uplink.LastError != "", fmt.Sprintf("%+v", *st.Uplink)
	})

	proxy.start(t, addr)
	st := waitSent(t, api)
	reqs := proxy.requests()
	if len(reqs) < 20 {
		t.Fatalf("%d requests: want at least 20 batches to measure a rate", len(reqs))
	}
	// Each request waited for its own bytes: from the first request to
	// the last, the cap paid for all of them but the first.
	var after, biggest int64
	for _, r := range reqs[1:] {
		after += r.body
		biggest = max(biggest, r.body)
	}
	span := reqs[len(reqs)-1].at.Sub(reqs[0].at)
	rate := float64(after) / span.Seconds()
	t.Logf("%d requests, %d bytes after the first over %s: %.0f bytes/s (cap %d); largest body %d bytes; %d readings sent",
		len(reqs), after, span.Round(time.Millisecond), rate, bps, biggest, st.Uplink.SentReadings)
	if span < 30*time.Second {
		t.Errorf("the backlog drained in %s: want at least 30 s to measure the rate", span)
	}
	if rate < 0.9*bps || rate > 1.1*bps {
		t.Errorf("drained at %.0f bytes/s, want %d within 10 %%", rate, bps)
	}
	if biggest <= bps {
		t.Errorf("largest body %d bytes: want batches bigger than the bucket's %d", biggest, bps)
	}
	checkUpstream(t, vm, fleet.msgs, fleet.acks)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn: %v\n%s", err, p.out)
	}
}
