package buffer

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// units returns the unit of every series of s, by "device metric".
func units(s *Store) map[string]string {
	out := make(map[string]string)
	for _, se := range s.SeriesList() {
		out[se.Device+" "+se.Metric] = se.Unit
	}
	return out
}

// storedUnits returns the units under the 'u' keys of s, by "device
// metric".
func storedUnits(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindUnit)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			device, metric, err := encoding.ParseUnitKey(it.Item().Key())
			if err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[device+" "+metric] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkUnits(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// A series keeps the last unit a stored reading brought: a reading
// without one leaves it, another one replaces it, a unit that is not
// valid is dropped; and the store has it again after a reopen.
func TestStore_UnitsKeptPerSeries(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{})
	w := tw.Writer
	ts := time.Now().UnixNano()
	r := func(device, metric string, i int, unit string) Reading {
		return Reading{Device: device, Metric: metric, TS: ts + int64(i), Value: float64(i), Unit: unit}
	}
	write(t, w,
		r("kitchen", "t", 0, "°C"), r("kitchen", "h", 0, "%"), r("kitchen", "n", 0, ""),
		r("meter", "energy", 0, "Wh"), r("meter", "energy", 1, "kWh"), // the last of a commit wins
	)
	write(t, w, r("kitchen", "t", 1, ""), r("kitchen", "h", 1, "%RH"))
	write(t, w,
		r("kitchen", "t", 2, "\x00C"), r("kitchen", "t", 3, "°C\n"), r("kitchen", "t", 4, "\xff"),
		r("kitchen", "n", 1, strings.Repeat("x", encoding.MaxUnitLen+1)),
	)
	want := map[string]string{"kitchen t": "°C", "kitchen h": "%RH", "kitchen n": "", "meter energy": "kWh"}
	checkUnits(t, "units", units(s), want)
	wantKeys := map[string]string{"kitchen t": "°C", "kitchen h": "%RH", "meter energy": "kWh"}
	checkUnits(t, "unit keys", storedUnits(t, s), wantKeys)
	if got := s.Unit("kitchen", "h"); got != "%RH" {
		t.Errorf("Unit(kitchen, h): got %q, want %%RH", got)
	}
	if got := s.Unit("kitchen", "nothing"); got != "" {
		t.Errorf("Unit of no series: got %q, want none", got)
	}
	devs, _ := s.Devices("", 10)
	if h := time.Unix(0, devs[0].Heard); time.Since(h) > time.Minute || time.Since(h) < 0 {
		t.Errorf("Devices: heard at %v, want within the test", h)
	}
	devs[0].Heard = 0 // heard.go's tests check it
	if got, want := devs[0], (Device{Name: "kitchen", Metrics: []string{"h", "n", "t"}, Units: []string{"%RH", "", "°C"}, Last: ts + 4}); !reflect.DeepEqual(got, want) {
		t.Errorf("Devices: got %+v, want %+v", got, want)
	}

	tw.stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, w = testStore(t, dir)
	checkUnits(t, "units after a reopen", units(s), want)
	write(t, w, r("kitchen", "n", 2, strings.Repeat("x", encoding.MaxUnitLen)))
	want["kitchen n"] = strings.Repeat("x", encoding.MaxUnitLen)
	checkUnits(t, "a unit of encoding.MaxUnitLen bytes", units(s), want)
}

// A duplicate reading and a refused one bring no unit.
func TestWriter_UnitsOnlyFromStoredReadings(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{MaxSeriesPerDevice: 1})
	r := Reading{Device: "d", Metric: "t", TS: 1000, Value: 1, Unit: "°C"}
	write(t, w, r)
	r.Unit = "K"
	if res := write(t, w, r); res.Duplicates != 1 {
		t.Fatalf("got %+v, want a duplicate", res)
	}
	if res := write(t, w, Reading{Device: "d", Metric: "h", TS: 1000, Unit: "%"}); res.Refused != 1 {
		t.Fatalf("got %+v, want a refusal", res)
	}
	checkUnits(t, "units", units(s), map[string]string{"d t": "°C"})
	checkUnits(t, "unit keys", storedUnits(t, s), map[string]string{"d t": "°C"})
}

// A unit is written with the journal entry of the reading that brought
// it: a copy of the directory taken while the journal holds everything,
// as a power cut would leave it, opens with every unit, those of series
// that are in no run yet included.
func TestJournal_UnitsSurviveACrash(t *testing.T) {
	dir, crashed := t.TempDir(), t.TempDir()
	func() {
		s, tw := openWriterOpts(t, dir, holdJournal)
		defer s.Close()
		defer tw.stop()
		write(t, tw.Writer, Reading{Device: "a", Metric: "t", TS: 1, Unit: "°C"}, Reading{Device: "a", Metric: "p", TS: 1, Unit: "hPa"})
		checkpoint(t, tw.Writer)
		write(t, tw.Writer, Reading{Device: "a", Metric: "t", TS: 2, Unit: "K"}, Reading{Device: "b", Metric: "t", TS: 2, Unit: "°F"})
		if n := countKeys(t, s, encoding.KindOutbox); n != 1 {
			t.Fatalf("journal entries: got %d, want 1", n)
		}
		copyLive(t, crashed, dir)
	}()
	s, _ := testStoreWith(t, crashed, holdJournal)
	want := map[string]string{"a t": "K", "a p": "hPa", "b t": "°F"}
	checkUnits(t, "units after the crash", units(s), want)
	checkUnits(t, "unit keys after the crash", storedUnits(t, s), want)
}

// A commit too large for one transaction writes each unit in the part
// that holds its reading.
func TestWriter_UnitsOfACommitInParts(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w := startWriter(t, s, WriterOptions{})
	unitsOf := []string{"°C", "%", "hPa", "lx", "ppm"}
	want := make(map[string]string)
	var rs []Reading
	for i := range 30000 {
		dev, met := "device-"+string(rune('a'+i%20)), "metric-"+string(rune('a'+i/20%15))
		u := unitsOf[i%len(unitsOf)]
		rs = append(rs, Reading{Device: dev, Metric: met, TS: int64(i), Value: float64(i), Unit: u})
		want[dev+" "+met] = u
	}
	before := w.Stats().Commits
	if res := write(t, w, rs...); res.Stored != len(rs) {
		t.Fatalf("stored %d of %d", res.Stored, len(rs))
	}
	if n := w.Stats().Commits - before; n != 1 {
		t.Fatalf("%d commits, want one", n)
	}
	checkUnits(t, "units", units(s), want)
	checkUnits(t, "unit keys", storedUnits(t, s), want)
}

// The unit of a series that no reading is left of goes with the series
// when the store is next opened; a key that is no series' unit, or a
// unit that is not valid, goes too.
func TestStore_UnitsOfSeriesNoLongerStoredAreDeleted(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{BucketSamples: 10, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	ctx := context.Background()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	old := now.Add(-5 * 24 * time.Hour).UnixNano()
	write(t, tw.Writer,
		Reading{Device: "gone", Metric: "t", TS: old, Unit: "°C"},
		Reading{Device: "kept", Metric: "t", TS: old, Unit: "°C"},
		Reading{Device: "kept", Metric: "t", TS: now.UnixNano(), Unit: "K"},
	)
	if err := tw.Prune(ctx, now); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(encoding.AppendUnitKey(nil, "never", "stored"), []byte("V")); err != nil {
			return err
		}
		return txn.Set(append([]byte{byte(encoding.KindUnit)}, "bad key"...), []byte("V"))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The index keeps a series until the store is opened again.
	checkUnits(t, "units after the prune", units(s), map[string]string{"gone t": "°C", "kept t": "K"})
	tw.stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = testStore(t, dir)
	want := map[string]string{"kept t": "K"}
	checkUnits(t, "units", units(s), want)
	checkUnits(t, "unit keys", storedUnits(t, s), want)
}

// ReadOutbox gives each reading the unit its series has when it is read.
func TestOutbox_ReadingsCarryTheirSeriesUnit(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{})
	upstream(t, s)
	write(t, w, Reading{Device: "d", Metric: "t", TS: 1, Unit: "°C"}, Reading{Device: "d", Metric: "n", TS: 1})
	write(t, w, Reading{Device: "d", Metric: "t", TS: 2})
	var got []string
	for _, r := range readOutbox(t, s) {
		got = append(got, r.Metric+" "+r.Unit)
	}
	if want := []string{"t °C", "n ", "t °C"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	write(t, w, Reading{Device: "d", Metric: "t", TS: 3, Unit: "K"})
	got = got[:0]
	for _, r := range readOutbox(t, s) {
		got = append(got, r.Metric+" "+r.Unit)
	}
	if want := []string{"t K", "n ", "t K", "t K"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a new unit: got %q, want %q", got, want)
	}
}
