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
// disk, topic line and payload, with why, under names that sort oldest
// first and are never reused; past maxSetAside the oldest are deleted,
// counted and logged, the newest kept; a new Uplink on the same
// directory reads them back, and renames a file cut short to .bad.
func TestSetAside_Bounded(t *testing.T) {
	dir := t.TempDir()
	opts, err := withDefaults(Options{Name: "cloud", URL: "mqtt://127.0.0.1:1883", Gateway: "gw", ParkDir: dir, MQTT: MQTTOptions{Version: MQTT5}})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	u := &Uplink{opts: opts, log: opts.Logger}
	const n = 20 // 100 MiB
	for i := range n {
		payload := bytes.Repeat([]byte{byte('a' + i)}, 5<<20)
		m := mqttMessage{topic: "cairn/gw/garage", payload: payload, seqs: []uint64{1, 2, 3}}
		// The same batch id each time, as after a reload: a new file.
		if err := u.parkRefused("gw-1", m, &Refusal{Code: 0x87}); err != nil {
			t.Fatal(err)
		}
	}
	u.mu.Lock()
	st := u.st
	u.mu.Unlock()
	kept := maxSetAside / (5<<20 + 16)
	if st.SetAsideDropped != uint64(n-kept) || st.Refused != n || st.ParkedBatches != uint64(kept) || st.ParkedReadings != 3*n {
		t.Errorf("status: %d dropped, %d refused, %d parked, %d parked readings; want %d, %d, %d, %d",
			st.SetAsideDropped, st.Refused, st.ParkedBatches, st.ParkedReadings, n-kept, n, kept, 3*n)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mqtt"))
	if len(files) != kept || len(u.mq.parked) != kept || files[kept-1] != u.mq.parked[kept-1].file {
		t.Fatalf("%d files (%v), %d set aside; want the newest %d, in order", len(files), files, len(u.mq.parked), kept)
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		want := append([]byte("cairn/gw/garage\n"), bytes.Repeat([]byte{byte('a' + n - kept + i)}, 5<<20)...)
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: %v, want the topic line and payload %c", f, err, 'a'+n-kept+i)
		}
		resp, err := os.ReadFile(strings.TrimSuffix(f, ".mqtt") + ".response")
		if err != nil || !strings.Contains(string(resp), "refused: not authorized (reason code 0x87)") {
			t.Errorf("%s's response: %q %v", f, resp, err)
		}
	}
	if !strings.Contains(logged.String(), "messages set aside are over their bound: deleted the oldest") {
		t.Errorf("no log of the deletes:\n%s", logged.String())
	}

	// A file cut short (a crash while a person edited it) is set apart.
	cut := filepath.Join(dir, "00000000000000000001-gw-0.mqtt")
	if err := os.WriteFile(cut, []byte("cairn/gw/gar"), 0o640); err != nil {
		t.Fatal(err)
	}
	again := &Uplink{opts: opts, log: opts.Logger}
	if err := again.loadParked(); err != nil || len(again.mq.parked) != kept || again.mq.parkedBytes != u.mq.parkedBytes {
		t.Errorf("read back: %v, %d messages of %d bytes; want %d of %d", err, len(again.mq.parked), again.mq.parkedBytes, kept, u.mq.parkedBytes)
	}
	if _, err := os.Stat(cut + ".bad"); err != nil {
		t.Errorf("the file cut short was not renamed to .bad: %v", err)
	}
}
