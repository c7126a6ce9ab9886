package buffer

import (
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// storedHeard returns the times under the 's' keys of s, by device.
func storedHeard(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	out := make(map[string]int64)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindHeard)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			device, err := encoding.ParseHeardKey(it.Item().Key())
			if err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[device] = encoding.DecodeTS(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// heardOf returns the Heard and Last of each device of s.
func heardOf(s *Store) (heard, last map[string]int64) {
	devs, _ := s.Devices("", 100)
	heard, last = make(map[string]int64), make(map[string]int64)
	for _, d := range devs {
		heard[d.Name], last[d.Name] = d.Heard, d.Last
	}
	return heard, last
}

// A device is heard when a commit stores a reading of it, at the
// commit's time whatever the reading's own, and not for a duplicate;
// the time is written to the store when it first comes and then when it
// moves by a minute, and is there again after a reopen.
func TestStore_HeardByTheGatewaysClock(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{})
	old := time.Date(2020, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	future := time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	before := time.Now().UnixNano()
	write(t, tw.Writer, Reading{Device: "old", Metric: "t", TS: old, Value: 1}, Reading{Device: "future", Metric: "t", TS: future, Value: 1})
	after := time.Now().UnixNano()
	heard, last := heardOf(s)
	for _, d := range []string{"old", "future"} {
		if heard[d] < before || heard[d] > after {
			t.Errorf("%s heard at %v, want between %v and %v", d, time.Unix(0, heard[d]), time.Unix(0, before), time.Unix(0, after))
		}
	}
	if last["old"] != old || last["future"] != future {
		t.Errorf("newest readings %v, want the readings' own times", last)
	}
	stored := storedHeard(t, s)
	if stored["old"] != heard["old"] || stored["future"] != heard["future"] {
		t.Errorf("stored heard times %v, want %v", stored, heard)
	}

	// A duplicate is not heard; a new reading is, in memory, and within
	// a minute it is not written again.
	first := heard["old"]
	if res := write(t, tw.Writer, Reading{Device: "old", Metric: "t", TS: old, Value: 1}); res.Duplicates != 1 {
		t.Fatalf("got %+v, want a duplicate", res)
	}
	if heard, _ = heardOf(s); heard["old"] != first {
		t.Errorf("after a duplicate, heard at %v, want %v as before", time.Unix(0, heard["old"]), time.Unix(0, first))
	}
	write(t, tw.Writer, Reading{Device: "old", Metric: "t", TS: old + 1, Value: 1})
	if heard, _ = heardOf(s); heard["old"] <= first {
		t.Errorf("after a new reading, heard at %v, want after %v", time.Unix(0, heard["old"]), time.Unix(0, first))
	}
	if got := storedHeard(t, s)["old"]; got != first {
		t.Errorf("stored heard time %v, want %v kept within a minute", time.Unix(0, got), time.Unix(0, first))
	}

	// A reopen has it from the store.
	tw.stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, w := testStore(t, dir)
	reopened, _ := heardOf(s)
	if reopened["old"] != first || reopened["future"] != stored["future"] {
		t.Errorf("after a reopen, heard %v, want %v", reopened, stored)
	}
	write(t, w, Reading{Device: "old", Metric: "h", TS: old, Value: 2})
	if heard, _ := heardOf(s); heard["old"] <= first {
		t.Errorf("heard at %v after a new reading, want after %v", time.Unix(0, heard["old"]), time.Unix(0, first))
	}
}

// A store written before heard times were kept has none: until a
// device is heard again it was last heard at its newest reading, or at
// the start if that is later.
func TestStore_HeardWithoutRecord(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{})
	old := time.Date(2020, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	future := time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	write(t, tw.Writer, Reading{Device: "old", Metric: "t", TS: old, Value: 1}, Reading{Device: "future", Metric: "t", TS: future, Value: 1})
	tw.stop()
	err := s.db.DropPrefix([]byte{byte(encoding.KindHeard)})
	if err == nil {
		err = s.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now().UnixNano()
	s, _ = testStore(t, dir)
	heard, _ := heardOf(s)
	if heard["old"] != old {
		t.Errorf("old heard at %v, want its newest reading's time", time.Unix(0, heard["old"]))
	}
	if h := heard["future"]; h < opened || h > time.Now().UnixNano() {
		t.Errorf("future heard at %v, want the start", time.Unix(0, h))
	}
}
