package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway"
)

// TestRun_UnmatchedTopics: messages on topics that no pattern matches are
// acknowledged and not stored, and a user who wonders why a device does
// not show up finds them counted and named in the status, in `cairn
// status`, in /metrics, and once in the log.
func TestRun_UnmatchedTopics(t *testing.T) {
	p := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), localConfig))
	api := newAPIClient(p.http)
	c := mustConnect(t, p.mqtt, "unmatched")
	for _, topic := range []string{"tele/plug-1/SENSOR", "tele/plug-1/SENSOR", "zigbee2mqtt/kitchen", "sensors/porch/telemetry"} {
		waitToken(t, c.Publish(topic, 1, false, `{"temp":21.5}`))
	}
	var st struct {
		Ingest gateway.IngestStats `json:"ingest"`
	}
	if code := api.get(t, "/v1/status", &st); code != 200 {
		t.Fatalf("GET /v1/status: %d", code)
	}
	in := st.Ingest
	if in.Unmatched != 3 || in.Stored != 1 || len(in.RecentUnmatched) != 2 ||
		in.RecentUnmatched[0].Topic != "zigbee2mqtt/kitchen" || in.RecentUnmatched[1].Topic != "tele/plug-1/SENSOR" || in.RecentUnmatched[1].Messages != 2 {
		t.Errorf("ingest status: unmatched %d, stored %d, recent %+v; want 3, 1, zigbee2mqtt/kitchen then tele/plug-1/SENSOR (2)", in.Unmatched, in.Stored, in.RecentUnmatched)
	}
	out, err := exec.Command(cairnBinary.get(t), "status", "-url", "http://"+p.http).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "3 messages on topics no mqtt.topics pattern matches, not stored (last: zigbee2mqtt/kitchen, tele/plug-1/SENSOR)") {
		t.Errorf("cairn status: %v\n%s", err, out)
	}
	if _, metrics, err := api.fetch("/metrics"); err != nil || !strings.Contains(string(metrics), "\ncairn_ingest_unmatched_total 3\n") {
		t.Errorf("/metrics: %v, want cairn_ingest_unmatched_total 3", err)
	}
	lines, err := p.out.WaitLines("no mqtt.topics pattern matches", 2, nil, 5*time.Second)
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "topic=tele/plug-1/SENSOR") || !strings.Contains(lines[1], "topic=zigbee2mqtt/kitchen") {
		t.Errorf("log: %v %q, want one line for each topic", err, lines)
	}
}
