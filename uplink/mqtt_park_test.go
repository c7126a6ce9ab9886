package uplink

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetAside_Bounded: messages set aside after a refusal are kept on
// disk, topic line and payload, with why; past maxSetAside the oldest are
// deleted, counted and logged, the newest kept; a new Uplink on the same
// directory reads them back.
func TestSetAside_Bounded(t *testing.T) {
	dir := t.TempDir()
	opts, err := withDefaults(Options{Name: "cloud", URL: "mqtt://127.0.0.1:1883", Gateway: "gw", ParkDir: dir, MQTT: MQTTOptions{Version: MQTT5}})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	u := &Uplink{opts: opts, log: opts.Logger}
	payload := bytes.Repeat([]byte("x"), 5<<20)
	const n = 20 // 100 MiB
	for i := range n {
		m := mqttMessage{topic: "cairn/gw/garage", payload: payload, seqs: []uint64{1, 2, 3}}
		if err := u.parkRefused("gw-1", i, m, &Refusal{Code: 0x87}); err != nil {
			t.Fatal(err)
		}
	}
	u.mu.Lock()
	st := u.st
	u.mu.Unlock()
	kept := maxSetAside / (5<<20 + 16)
	if st.SetAsideDropped != uint64(n-kept) || st.Refused != n || st.ParkedBatches != uint64(kept) {
		t.Errorf("status: %d dropped, %d refused, %d parked; want %d, %d, %d", st.SetAsideDropped, st.Refused, st.ParkedBatches, n-kept, n, kept)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mqtt"))
	if len(files) != kept || !containsFile(u.mq.parked, filepath.Join(dir, "gw-1-19.mqtt")) {
		t.Errorf("%d files (%v), want the newest %d", len(files), files, kept)
	}
	if _, err := os.Stat(filepath.Join(dir, "gw-1-0.mqtt")); !os.IsNotExist(err) {
		t.Errorf("the oldest message set aside is still there: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gw-1-19.mqtt"))
	if err != nil || !bytes.Equal(b, append([]byte("cairn/gw/garage\n"), payload...)) {
		t.Errorf("gw-1-19.mqtt: %v, want the topic line and the payload", err)
	}
	resp, err := os.ReadFile(filepath.Join(dir, "gw-1-19.response"))
	if err != nil || !strings.Contains(string(resp), "refused: not authorized (reason code 0x87)") {
		t.Errorf("gw-1-19.response: %q %v", resp, err)
	}
	if !strings.Contains(logged.String(), "messages set aside are over their bound: deleted the oldest") {
		t.Errorf("no log of the deletes:\n%s", logged.String())
	}
	again := &Uplink{opts: opts, log: opts.Logger}
	if err := again.loadParked(); err != nil || len(again.mq.parked) != kept || again.mq.parkedBytes != u.mq.parkedBytes {
		t.Errorf("read back: %v, %d messages of %d bytes; want %d of %d", err, len(again.mq.parked), again.mq.parkedBytes, kept, u.mq.parkedBytes)
	}
}
