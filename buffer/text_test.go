package buffer

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// textOf is a text reading of device's metric at ts.
func textOf(device, metric string, ts int64, text string) Reading {
	return Reading{Device: device, Metric: metric, TS: ts, Text: text}
}

// readingKey names a reading for comparisons: its series, time and
// value or text.
func readingKey(r Reading) string {
	if r.Text != "" {
		return fmt.Sprintf("%s|%s|%d|%q|%v", r.Device, r.Metric, r.TS, r.Text, r.Value)
	}
	return fmt.Sprintf("%s|%s|%d|%v", r.Device, r.Metric, r.TS, r.Value)
}

// checkTexts checks that the readings of device are want, in time order
// (ties by metric), texts included.
func checkTexts(t *testing.T, what string, s *Store, device string, want []Reading) {
	t.Helper()
	got, err := s.Readings(all(device))
	if err != nil {
		t.Fatal(err)
	}
	var g, w []string
	for _, r := range got {
		g = append(g, readingKey(r))
	}
	for _, r := range want {
		w = append(w, readingKey(r))
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: readings of %s\ngot  %q\nwant %q", what, device, g, w)
	}
}

// storedTexts returns the 't' keys of s: "device metric id" → text.
func storedTexts(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindText)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			device, metric, id, err := encoding.ParseTextKey(it.Item().Key())
			if err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("%s %s %d", device, metric, id)] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A text series keeps its texts: queries (open points, the journal,
// sealed buckets), Latest and the log give them back; its dictionary
// numbers them in the order first seen, is on disk with them, and comes
// back at Open, where a new text takes the next id.
func TestText_StoredQueriedSealedAndReopened(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{BucketSamples: 10, SealCheck: time.Hour})
	upstream(t, s)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	modes := []string{"heat", "heat", "off", "cool", "heat", "off", "Küche an"}
	var want []Reading
	for i := range 30 {
		want = append(want, textOf("hall", "mode", base+int64(i)*10e9, modes[i%len(modes)]))
		want = append(want, Reading{Device: "hall", Metric: "t", TS: base + int64(i)*10e9, Value: 20 + float64(i)/4})
	}
	res := write(t, tw.Writer, want...)
	if res.Stored != len(want) || res.WrongKind+res.TooManyStates+res.Refused+res.Duplicates != 0 {
		t.Fatalf("result %+v, want %d stored", res, len(want))
	}
	checkTexts(t, "in the journal", s, "hall", want)
	if !s.IsText("hall", "mode") || s.IsText("hall", "t") || s.IsText("hall", "nope") {
		t.Errorf("IsText: mode %v, t %v, nope %v; want true, false, false", s.IsText("hall", "mode"), s.IsText("hall", "t"), s.IsText("hall", "nope"))
	}
	wantDict := []string{"heat", "off", "cool", "Küche an"}
	if got := s.Texts("hall", "mode"); !reflect.DeepEqual(got, wantDict) {
		t.Errorf("dictionary %q, want %q", got, wantDict)
	}
	wantKeys := map[string]string{"hall mode 0": "heat", "hall mode 1": "off", "hall mode 2": "cool", "hall mode 3": "Küche an"}
	if got := storedTexts(t, s); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("text keys %q, want %q", got, wantKeys)
	}
	latest, err := s.Latest("hall")
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 2 || latest[0].Text != want[len(want)-2].Text || latest[0].Value != 0 || latest[1].Text != "" {
		t.Errorf("latest %+v", latest)
	}
	checkpoint(t, tw.Writer)
	checkTexts(t, "in runs", s, "hall", want)
	if err := tw.SealDue(context.Background(), time.Unix(0, base+2*day)); err != nil {
		t.Fatal(err)
	}
	if n := checkBuckets(t, s, 10); n == 0 {
		t.Fatal("nothing sealed")
	}
	checkTexts(t, "sealed", s, "hall", want)
	out := readOutbox(t, s)
	if len(out) != len(want) {
		t.Fatalf("log holds %d readings, want %d", len(out), len(want))
	}
	for i, r := range out {
		if readingKey(r.Reading) != readingKey(want[i]) {
			t.Fatalf("log reading %d: %+v, want %+v", i, r.Reading, want[i])
		}
	}
	tw.stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, tw = openWriterOpts(t, dir, WriterOptions{BucketSamples: 10, SealCheck: time.Hour})
	defer func() {
		tw.stop()
		s.Close()
	}()
	checkTexts(t, "reopened", s, "hall", want)
	more := []Reading{textOf("hall", "mode", base+1000e9, "auto"), textOf("hall", "mode", base+1010e9, "heat")}
	write(t, tw.Writer, more...)
	want = append(want, more...)
	checkTexts(t, "reopened, then written", s, "hall", want)
	if got := s.Texts("hall", "mode"); !reflect.DeepEqual(got, append(wantDict, "auto")) {
		t.Errorf("dictionary after reopening %q, want %q", got, append(wantDict, "auto"))
	}
	latest, err = s.LatestAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 2 || latest[0].Text != "heat" || latest[0].TS != base+1010e9 {
		t.Errorf("latest after reopening %+v", latest)
	}
}

// The same time and text is one reading, wherever the first is (the
// part under way, the journal, open runs, a sealed bucket); the same time
// with another text is another reading.
func TestText_SameTimeAndTextStoredOnce(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 4, SealCheck: time.Hour})
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	btn := func(i int, text string) Reading { return textOf("btn", "action", base+int64(i)*1e9, text) }
	res := write(t, w, btn(0, "single"), btn(0, "single"), btn(0, "double"), btn(1, "hold"))
	if res.Stored != 3 || res.Duplicates != 1 {
		t.Errorf("one commit: stored %d, duplicates %d; want 3, 1", res.Stored, res.Duplicates)
	}
	check := func(where string) {
		t.Helper()
		res := write(t, w, btn(0, "single"), btn(0, "double"), btn(1, "hold"), btn(1, "single"))
		if res.Stored != 1 || res.Duplicates != 3 {
			t.Errorf("%s: stored %d, duplicates %d; want 1, 3", where, res.Stored, res.Duplicates)
		}
	}
	check("journal")
	checkpoint(t, w)
	res = write(t, w, btn(0, "single"), btn(1, "hold"), btn(1, "single"))
	if res.Duplicates != 3 {
		t.Errorf("runs: duplicates %d, want 3", res.Duplicates)
	}
	if err := w.SealDue(context.Background(), time.Unix(0, base+2*day)); err != nil {
		t.Fatal(err)
	}
	res = write(t, w, btn(0, "single"), btn(0, "double"), btn(1, "hold"), btn(1, "single"), btn(1, "double"))
	if res.Stored != 1 || res.Duplicates != 4 {
		t.Errorf("sealed: stored %d, duplicates %d; want 1, 4", res.Stored, res.Duplicates)
	}
	// Ties by the value's bits: by id, the order first seen.
	want := []Reading{btn(0, "single"), btn(0, "double"), btn(1, "single"), btn(1, "double"), btn(1, "hold")}
	checkTexts(t, "after all", s, "btn", want)
	if n := s.ReadingCount(); n != 5 {
		t.Errorf("reading count %d, want 5", n)
	}
}

// A reading of the other kind than its series, and a new text beyond
// MaxStates, are refused one by one, each counted under its reason with
// its first example; the rest of the batch is stored.
func TestText_RefusedByKindAndStates(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{MaxStates: 3})
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	num := func(metric string, i int) Reading {
		return Reading{Device: "d", Metric: metric, TS: base + int64(i)*1e9, Value: float64(i)}
	}
	txt := func(metric string, i int, text string) Reading { return textOf("d", metric, base+int64(i)*1e9, text) }
	res := write(t, w,
		num("t", 0), txt("t", 1, "x"), // a number series: the text refused
		txt("mode", 0, "a"), num("mode", 1), // a text series, in the same commit: the number refused
		txt("mode", 2, "b"), txt("mode", 3, "c"), txt("mode", 4, "d"), txt("mode", 5, "a"), txt("mode", 6, "e"),
	)
	if res.Stored != 5 || res.WrongKind != 2 || res.TooManyStates != 2 {
		t.Errorf("result %+v; want 5 stored, 2 of the wrong kind, 2 too many states", res)
	}
	if r := res.KindRefusal; r == nil || r.Metric != "t" || r.SeriesText {
		t.Errorf("kind refusal %+v, want the first: metric t, a number series", r)
	} else if want := `device "d" metric "t" is a number series; a text reading refused`; r.Error() != want {
		t.Errorf("kind refusal %q, want %q", r.Error(), want)
	}
	if r := res.StatesRefusal; r == nil || r.Text != "d" || r.Max != 3 {
		t.Errorf("states refusal %+v, want text d, max 3", r)
	} else if want := `device "d" metric "mode" has 3 texts (store.max_states_per_series); text "d" refused`; r.Error() != want {
		t.Errorf("states refusal %q, want %q", r.Error(), want)
	}
	// Committed now: the same in a later commit.
	res = write(t, w, num("mode", 7), txt("t", 7, "y"), txt("mode", 8, "f"), txt("mode", 9, "c"))
	if res.Stored != 1 || res.WrongKind != 2 || res.TooManyStates != 1 || res.KindRefusal == nil || !res.KindRefusal.SeriesText {
		t.Errorf("later commit: result %+v; want 1 stored, 2 wrong kind (the first a number into a text series), 1 too many", res)
	}
	st := w.Stats()
	if st.WrongKind != 4 || st.TooManyStates != 3 || st.Refused != 0 {
		t.Errorf("writer stats: wrong kind %d, too many states %d, refused %d; want 4, 3, 0", st.WrongKind, st.TooManyStates, st.Refused)
	}
	checkTexts(t, "stored", s, "d", []Reading{txt("mode", 0, "a"), num("t", 0), txt("mode", 2, "b"), txt("mode", 3, "c"), txt("mode", 5, "a"), txt("mode", 9, "c")})
	if got := s.Texts("d", "mode"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("dictionary %q", got)
	}
	// A text that is not one refuses the batch, as a bad name does.
	for _, bad := range []string{string(make([]byte, encoding.MaxText+1)), "a\x00b", "\xff"} {
		if err := w.Submit(context.Background(), []Reading{txt("mode", 20, bad)}, func(Result) {}); err == nil {
			t.Errorf("text %q: submitted", bad)
		}
	}
}

// A text series has no numeric _stats (sums of ids mean nothing); its
// number neighbours have theirs.
func TestText_NoNumericStats(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{})
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	write(t, w, textOf("d", "mode", base, "on"), textOf("d", "mode", base+1e9, "off"),
		Reading{Device: "d", Metric: "t", TS: base, Value: 1}, Reading{Device: "d", Metric: "t", TS: base + 1e9, Value: 2})
	for _, flushed := range []bool{false, true} {
		if flushed {
			checkpoint(t, w)
		}
		for metric, n := range map[string]uint64{"mode": 0, "t": 2} {
			got, _, err := s.StatsByLevel("d", metric, aggregate.Minute, base, base+day)
			if err != nil {
				t.Fatal(err)
			}
			var count uint64
			for _, g := range got {
				count += g.Stats.Count
			}
			if count != n {
				t.Errorf("checkpointed %v: %s: %d readings in _stats, want %d", flushed, metric, count, n)
			}
		}
	}
}

// Retention by age, and the disk cap dropping the oldest unsent entries,
// treat text readings as any: what is left is queried with its texts, and
// the log still carries the texts of what is left unsent.
func TestText_RetentionAndDiskCap(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{BucketSamples: 10, SealCheck: time.Hour, Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	upstream(t, s)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	states := []string{"open", "closed"}
	var rs []Reading
	for h := range 10 * 24 {
		r := textOf("door", "contact", base+int64(h)*3600e9, states[h%2])
		rs = append(rs, r)
		write(t, w, r) // an entry each, for DropOutbox below
	}
	if err := w.SealDue(ctx, time.Unix(0, base+11*day)); err != nil {
		t.Fatal(err)
	}
	if err := w.Prune(ctx, time.Unix(0, base+10*day+day/2)); err != nil {
		t.Fatal(err)
	}
	checkTexts(t, "pruned", s, "door", rs[len(rs)-12:])
	if n := s.ReadingCount(); n != 12 {
		t.Errorf("raw readings after pruning: got %d, want 12", n)
	}
	drop, err := s.DropOutbox(100)
	if err != nil {
		t.Fatal(err)
	}
	out := readOutbox(t, s)
	rest := rs[drop.Readings():]
	if len(out) != len(rest) {
		t.Fatalf("log holds %d after dropping %d, want %d", len(out), drop.Readings(), len(rest))
	}
	for i, r := range out {
		if readingKey(r.Reading) != readingKey(rest[i]) {
			t.Fatalf("log reading %d: %+v, want %+v", i, r.Reading, rest[i])
		}
	}
}

// A store written by the cairn of keyspace version 5 (numbers only, its
// log in entries of version 1) opens: its readings are queried as they
// were, the readings its upstream had not sent go out unchanged, the
// store is version 6 after, and takes text series beside its numbers.
// buffer/testdata/store-v5.tar.gz: scripts/fixture/make-store-v5.sh.
func TestText_OpensAVersion5Store(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("tar", "-xzf", "testdata/store-v5.tar.gz", "-C", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	dir = filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1795132800) * 1e9
	var want []Reading
	for i := range 300 {
		want = append(want, Reading{Device: "dev", Metric: fmt.Sprintf("m%d", i%3), TS: t0 + int64(i)*1e9, Value: float64(i) / 4})
	}
	s, tw := openWriterOpts(t, dir, WriterOptions{})
	defer func() {
		tw.stop()
		s.Close()
	}()
	if s.schema != encoding.SchemaVersion {
		t.Errorf("keyspace version %d after opening, want %d", s.schema, encoding.SchemaVersion)
	}
	checkTexts(t, "version 5 store", s, "dev", want)
	if n := s.ReadingCount(); n != 300 {
		t.Errorf("reading count %d, want 300", n)
	}
	if got := s.Unit("dev", "m0"); got != "°C" {
		t.Errorf("unit %q, want °C", got)
	}
	c := upstream(t, s)
	o := c.Outbox()
	got, err := c.ReadOutbox(o.Cursor, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkOutbox(t, got, 100, want[100:])
	for _, r := range got {
		if r.Text != "" {
			t.Fatalf("a number of the old log has text %q", r.Text)
		}
	}
	more := []Reading{textOf("dev", "mode", t0+400e9, "eco"), {Device: "dev", Metric: "m0", TS: t0 + 400e9, Value: 1}}
	if res := write(t, tw.Writer, more...); res.Stored != 2 {
		t.Fatalf("after opening: %+v", res)
	}
	if got, err := c.ReadOutbox(o.Cursor, 1000, nil); err != nil || len(got) != 202 || got[200].Text != "eco" || got[201].Value != 1 {
		t.Errorf("log after a text: %d readings, %v", len(got), err)
	}
}

// mustNot keeps math imported for helpers of other files' tests.
var _ = math.MaxInt64

// An upstream catching up reads texts from both ends of the log: its
// live stream ahead of the backlog, and the backlog, across a reopen.
func TestText_CatchUpReadsTexts(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{})
	upstream(t, s)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var want []Reading
	for i := range 10 {
		rs := []Reading{textOf("btn", "action", base+int64(i)*1e9, []string{"single", "double"}[i%2]),
			{Device: "btn", Metric: "battery", TS: base + int64(i)*1e9, Value: float64(100 - i)}}
		write(t, tw.Writer, rs...)
		want = append(want, rs...)
	}
	tw.stop()
	s = reopen(t, s)
	defer s.Close()
	c := upstream(t, s)
	if err := c.AimLive(12); err != nil {
		t.Fatal(err)
	}
	o := c.Outbox()
	live, err := c.ReadOutbox(o.Live, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	backlog, err := c.ReadOutbox(o.Cursor, int(o.Mark-o.Cursor), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := append(backlog, live...)
	if len(got) != len(want) {
		t.Fatalf("read %d readings (%d backlog, %d live), want %d", len(got), len(backlog), len(live), len(want))
	}
	for i, r := range got {
		if readingKey(r.Reading) != readingKey(want[i]) || r.Seq != uint64(i) {
			t.Errorf("reading %d: %+v, want %+v", i, r, want[i])
		}
	}
}
