package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// TestMQTTUplink_V5RefusalSetAside: over MQTT 5, Mosquitto refuses a
// publish its ACL forbids with a PUBACK of reason code 0x87 (to MQTT 3.1.1
// it acknowledges it and drops it: TestMQTTUplink_MosquittoACLRefusalIsHidden).
// The refused message is counted, logged with its topic and reason, and
// set aside in the park directory; the other device's messages, on a
// topic the ACL allows, keep arriving, and the cursor moves on. The
// message set aside is tried again at later batches, with a backoff, on
// little CPU; once the ACL allows its topic, it arrives, and every reading
// is at the subscriber once.
func TestMQTTUplink_V5RefusalSetAside(t *testing.T) {
	bin := cairnBinary.get(t)
	cloud := startMQTTCloud(t, "")
	// Of the gateway's topics, the ACL allows only device dev-0's.
	aclFile := filepath.Join(cloud.dir, "acl")
	full, err := os.ReadFile(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	setACL := func(acl []byte) {
		t.Helper()
		if err := os.WriteFile(aclFile, acl, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := cloud.proc.Cmd.Process.Signal(syscall.SIGHUP); err != nil { // reloads the ACL
			t.Fatal(err)
		}
	}
	sink := cloud.subscribe(t)
	setACL([]byte("user " + mqttUpstreamGateway + "\ntopic write cairn/" + mqttUpstreamGateway + "/dev-0\n\nuser reader\ntopic read cairn/#\n"))
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, localConfig+cloud.entry("    mqtt_version: 5\n"))
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 2, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 200)

	readingsOf := func(device string) int {
		n := 0
		for i, m := range fleet.msgs {
			if m.device == device && fleet.acks.isAcked(i) {
				n += len(m.readings(i))
			}
		}
		return n
	}
	waitUntil(t, 30*time.Second, "dev-0's readings at the subscriber, dev-1's set aside", func() (bool, string) {
		ids, _ := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids == readingsOf("dev-0") && st.PendingReadings == 0 && st.ParkedBatches > 0,
			fmt.Sprintf("%d ids of %d; status %+v", ids, readingsOf("dev-0"), st)
	})
	st := uplinkStatuses(t, api)["cloud"]
	const topic = "cairn/" + mqttUpstreamGateway + "/dev-1"
	if st.Refused == 0 || !strings.Contains(st.LastError, "publish to "+topic+": refused: not authorized (reason code 0x87)") {
		t.Errorf("status: refused %d, last_error %q; want the refusal of %s with its reason", st.Refused, st.LastError, topic)
	}
	line, err := p.out.WaitLine(`msg="the broker refused a message; set it aside`, p.Exited(), time.Second)
	if err != nil || !strings.Contains(line, "topic="+topic) || !strings.Contains(line, "not authorized") {
		t.Errorf("log: %q (%v), want the refusal with topic and reason", line, err)
	}
	parked, _ := filepath.Glob(filepath.Join(dataDir, "parked", "cloud", "*.mqtt"))
	if len(parked) == 0 || uint64(len(parked)) != st.ParkedBatches {
		t.Errorf("%d messages set aside in parked/cloud/ (%q), status says %d", len(parked), parked, st.ParkedBatches)
	}
	sink.mu.Lock()
	for _, k := range sink.byID {
		if k.device != "dev-0" {
			t.Errorf("the subscriber got a reading of %s, which the ACL forbids", k.device)
			break
		}
	}
	sink.mu.Unlock()

	// 10 s of more readings: each batch tries the messages set aside
	// whose backoff (up to retry_wait_max, 1s) is over, on little CPU.
	cpu0, err := testkit.CPUTime(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	before, start := st.Refused, time.Now()
	for time.Since(start) < 10*time.Second {
		fleet.publishNew(t, p.mqtt, "dev", t0+int64(len(fleet.msgs)), 4)
		time.Sleep(200 * time.Millisecond) // a publisher's pace
	}
	cpu1, err := testkit.CPUTime(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	refused := uplinkStatuses(t, api)["cloud"].Refused - before
	t.Logf("%d refusals in %s, cairn used %s of CPU (%.1f%% of a core)", refused, elapsed.Round(time.Millisecond), cpu1-cpu0, 100*float64(cpu1-cpu0)/float64(elapsed))
	if share := float64(cpu1-cpu0) / float64(elapsed); share > 0.10 {
		t.Errorf("cairn used %s of CPU in %s (%.0f%% of a core), want under 10%%", cpu1-cpu0, elapsed, 100*share)
	}
	if refused == 0 {
		t.Errorf("no refusal in %s of batches: the messages set aside are not tried again", elapsed)
	}

	// The ACL allows dev-1 again: what was set aside arrives, once.
	// They are tried when their topic's wait is over, with no batch to
	// go: nothing more is published.
	setACL(full)
	waitUntil(t, 30*time.Second, "every reading at the subscriber, nothing set aside", func() (bool, string) {
		ids, _ := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids == readingsOf("dev-0")+readingsOf("dev-1") && st.ParkedBatches == 0 && st.PendingReadings == 0,
			fmt.Sprintf("%d ids; status %+v", ids, st)
	})
	sink.check(t, fleet.msgs, fleet.acks, 128<<10)
	if st := uplinkStatuses(t, api)["cloud"]; st.Failing() {
		t.Errorf("the upstream still shows as failing once what was set aside was taken: %+v", st)
	}
	if line, err := p.out.WaitLine(`msg="the broker takes a refused topic's messages again"`, p.Exited(), time.Second); err != nil || !strings.Contains(line, "topic="+topic) {
		t.Errorf("the log does not say the messages set aside were taken: %q %v", line, err)
	}
	if parked, _ := filepath.Glob(filepath.Join(dataDir, "parked", "cloud", "*")); len(parked) != 0 {
		t.Errorf("files left in parked/cloud/: %q", parked)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
}

// TestMQTTUplink_V5PacketTooLarge: an MQTT 5 broker announces its
// maximum packet size (Mosquitto's max_packet_size) in its CONNACK; a
// message over it, which would have the broker close the connection, is
// not sent but refused (0x95) and set aside, and the batch's smaller
// messages go. Once the broker takes larger packets, the messages set
// aside arrive, and every reading is at the subscriber once.
func TestMQTTUplink_V5PacketTooLarge(t *testing.T) {
	bin := cairnBinary.get(t)
	cloud := startMQTTCloud(t, "max_packet_size 2048\n")
	sink := cloud.subscribe(t)
	cfg := writeConfig(t, t.TempDir(), localConfig+cloud.entry("    max_message_bytes: 8KiB\n    mqtt_version: 5\n"))
	p := startCairn(t, bin, cfg)
	api := newAPIClient(p.http)
	fleet := &sensorFleet{devices: 1, window: 64, acks: newAckLog(0)}
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	fleet.publishNew(t, p.mqtt, "dev", t0, 300)

	waitUntil(t, 30*time.Second, "the large messages set aside, the cursor past them", func() (bool, string) {
		st := uplinkStatuses(t, api)["cloud"]
		return st.PendingReadings == 0 && st.ParkedBatches > 0, fmt.Sprintf("%+v", st)
	})
	st := uplinkStatuses(t, api)["cloud"]
	if !strings.Contains(st.LastError, "refused: packet too large (reason code 0x95)") || !strings.Contains(st.LastError, "over the broker's maximum packet size of 2048") {
		t.Errorf("last_error %q, want the packet too large for the broker's maximum", st.LastError)
	}
	if ids, _ := sink.counts(); ids >= 2*fleet.acks.count() {
		t.Errorf("every reading arrived (%d) through a broker that takes packets of 2048 bytes at most", ids)
	}
	if strings.Contains(p.out.String(), "connection lost") {
		t.Errorf("cairn sent a packet the broker closed the connection for:\n%s", p.out)
	}

	// The broker without the limit: the messages set aside arrive.
	conf, err := os.ReadFile(cloud.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cloud.conf, []byte(strings.Replace(string(conf), "max_packet_size 2048\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cloud.stop(t)
	cloud.start(t)
	waitUntil(t, 60*time.Second, "every reading at the subscriber, nothing set aside", func() (bool, string) {
		ids, got := sink.counts()
		st := uplinkStatuses(t, api)["cloud"]
		return ids == 2*fleet.acks.count() && st.ParkedBatches == 0, fmt.Sprintf("%d ids, %d readings; status %+v", ids, got, st)
	})
	sink.check(t, fleet.msgs, fleet.acks, 8<<10)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: %v\n%s", err, p.out)
	}
}
