package buffer

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Badger's and ristretto's caches keep a few goroutines per
		// process that outlive a closed DB.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*Cache[...]).processItems"),
	)
}

// testStore opens a store in a temporary directory and runs its writer
// until the test ends.
func testStore(t *testing.T, dir string) (*Store, *Writer) {
	t.Helper()
	return testStoreWith(t, dir, WriterOptions{})
}

// testStoreWith is testStore with the Writer's options.
func testStoreWith(t *testing.T, dir string, opts WriterOptions) (*Store, *Writer) {
	t.Helper()
	return testStoreOpts(t, Options{Dir: dir}, opts)
}

// testStoreOpts is testStoreWith with the store's options too.
func testStoreOpts(t *testing.T, sopts Options, opts WriterOptions) (*Store, *Writer) {
	t.Helper()
	if sopts.Dir == "" {
		sopts.Dir = t.TempDir()
	}
	s, err := Open(sopts)
	if err != nil {
		t.Fatal(err)
	}
	return s, startWriter(t, s, opts)
}

// startWriter runs a Writer of s until the test ends, then closes s.
func startWriter(t *testing.T, s *Store, opts WriterOptions) *Writer {
	t.Helper()
	w := NewWriter(s, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return w
}

// write submits readings and waits for their result.
func write(t *testing.T, w *Writer, rs ...Reading) Result {
	t.Helper()
	ch := make(chan Result, 1)
	if err := w.Submit(context.Background(), rs, func(r Result) { ch <- r }); err != nil {
		t.Fatalf("submit: %v", err)
	}
	res := <-ch
	if res.Err != nil {
		t.Fatalf("write: %v", res.Err)
	}
	return res
}

// checkpoint has w checkpoint its journal, then seal and roll up, as it
// does a while after a commit.
func checkpoint(t *testing.T, w *Writer) {
	t.Helper()
	if err := w.Checkpoint(context.Background()); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
}

func all(device string) Query {
	return Query{Device: device, From: math.MinInt64, To: math.MaxInt64, Limit: MaxQueryLimit}
}

func TestWriter_SameReadingStoredOnce(t *testing.T) {
	s, w := testStore(t, "")
	r := Reading{Device: "d1", Metric: "t", TS: 1000, Value: 21.5}
	if got := write(t, w, r); got.Stored != 1 || got.Duplicates != 0 {
		t.Fatalf("first write: got %+v, want 1 stored", got)
	}
	// Redelivery, an older reading of the same series, and a repeat within
	// one commit.
	older := Reading{Device: "d1", Metric: "t", TS: 500, Value: 20}
	if got := write(t, w, r, older, older); got.Stored != 1 || got.Duplicates != 2 {
		t.Fatalf("second write: got %+v, want 1 stored and 2 duplicates", got)
	}
	// Same timestamp, other value: a different reading.
	other := Reading{Device: "d1", Metric: "t", TS: 1000, Value: 22}
	if got := write(t, w, other); got.Stored != 1 {
		t.Fatalf("same ts, other value: got %+v, want 1 stored", got)
	}
	got, err := s.Readings(all("d1"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Reading{older, r, other} // oldest first; equal timestamps by value
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readings:\n got %+v\nwant %+v", got, want)
	}
	if n := s.ReadingCount(); n != 3 {
		t.Errorf("ReadingCount: got %d, want 3", n)
	}
	ws := w.Stats()
	if ws.Stored != 3 || ws.Duplicates != 2 {
		t.Errorf("writer stats: got %+v, want 3 stored, 2 duplicates", ws)
	}
}

func TestStore_Readings(t *testing.T) {
	s, w := testStore(t, "")
	var rs []Reading
	for i := range 10 {
		ts := int64(i) * int64(time.Second)
		rs = append(rs,
			Reading{Device: "a", Metric: "temp", TS: ts, Value: float64(i)},
			Reading{Device: "a", Metric: "hum", TS: ts + 1, Value: float64(100 + i)},
			Reading{Device: "ab", Metric: "temp", TS: ts, Value: -1},
		)
	}
	write(t, w, rs...)
	sec := int64(time.Second)
	tests := []struct {
		name string
		q    Query
		want []float64 // values, in order
	}{
		{"latest of all metrics", Query{Device: "a", From: math.MinInt64, To: math.MaxInt64, Desc: true, Limit: 3}, []float64{109, 9, 108}},
		{"oldest of one metric", Query{Device: "a", Metric: "temp", From: math.MinInt64, To: math.MaxInt64, Limit: 3}, []float64{0, 1, 2}},
		{"range is half open", Query{Device: "a", Metric: "temp", From: 2 * sec, To: 5 * sec, Limit: 100}, []float64{2, 3, 4}},
		{"range descending", Query{Device: "a", Metric: "temp", From: 2 * sec, To: 5 * sec, Desc: true, Limit: 100}, []float64{4, 3, 2}},
		{"range across metrics", Query{Device: "a", From: 8 * sec, To: 9*sec + 2, Limit: 100}, []float64{8, 108, 9, 109}},
		{"device is not a prefix", Query{Device: "a", Metric: "temp", From: 0, To: 1, Limit: 100}, []float64{0}},
		{"unknown metric", Query{Device: "a", Metric: "nope", From: math.MinInt64, To: math.MaxInt64, Limit: 5}, nil},
		{"unknown device", Query{Device: "zz", From: math.MinInt64, To: math.MaxInt64, Limit: 5}, nil},
		{"empty range", Query{Device: "a", From: 5, To: 5, Limit: 5}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Readings(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var vals []float64
			for _, r := range got {
				if r.Device != tt.q.Device {
					t.Errorf("reading of device %q in a query for %q", r.Device, tt.q.Device)
				}
				vals = append(vals, r.Value)
			}
			if !reflect.DeepEqual(vals, tt.want) {
				t.Errorf("got values %v, want %v", vals, tt.want)
			}
		})
	}
	if _, err := s.Readings(Query{Device: "a", From: 0, To: 1, Limit: 0}); err == nil {
		t.Error("limit 0: got nil error")
	}
}

func TestStore_ReopenKeepsIndexAndCounts(t *testing.T) {
	dir := t.TempDir()
	func() {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		w := NewWriter(s, WriterOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		write(t, w,
			Reading{Device: "a", Metric: "t", TS: 5, Value: 1},
			Reading{Device: "a", Metric: "t", TS: 9, Value: 2},
			Reading{Device: "a", Metric: "u", TS: 7, Value: 3},
			Reading{Device: "b", Metric: "t", TS: 3, Value: 4},
		)
		cancel()
		<-done
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	s, w := testStore(t, dir)
	want := []Series{{"a", "t", 9, ""}, {"a", "u", 7, ""}, {"b", "t", 3, ""}}
	if got := s.SeriesList(); !reflect.DeepEqual(got, want) {
		t.Errorf("series after reopen:\n got %+v\nwant %+v", got, want)
	}
	if n := s.ReadingCount(); n != 4 {
		t.Errorf("ReadingCount after reopen: got %d, want 4", n)
	}
	// The index must know what is stored: the same readings again are
	// duplicates, a newer one is new.
	res := write(t, w, Reading{Device: "a", Metric: "t", TS: 9, Value: 2}, Reading{Device: "b", Metric: "t", TS: 3, Value: 4}, Reading{Device: "b", Metric: "t", TS: 4, Value: 4})
	if res.Stored != 1 || res.Duplicates != 2 {
		t.Errorf("after reopen: got %+v, want 1 stored, 2 duplicates", res)
	}
}

func TestWriter_ResultsInSubmitOrder(t *testing.T) {
	_, w := testStore(t, "")
	const n = 2000
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		r := Reading{Device: "d", Metric: "m", TS: int64(i), Value: float64(i % 7)}
		err := w.Submit(context.Background(), []Reading{r}, func(res Result) {
			if res.Err != nil || res.Stored != 1 {
				t.Errorf("submit %d: got %+v", i, res)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("result %d was for submit %d: results must follow submit order", i, got)
		}
	}
	if c := w.Stats().Commits; c >= n {
		t.Errorf("got %d commits for %d submits: no group commit happened", c, n)
	}
}

func TestWriter_StopCommitsQueuedAndRefusesMore(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := NewWriter(s, WriterOptions{})
	// Queue before the writer runs, then run it with a cancelled context:
	// what was queued is committed, later submits are refused.
	got := make(chan Result, 1)
	if err := w.Submit(context.Background(), []Reading{{Device: "d", Metric: "m", TS: 1}}, func(r Result) { got <- r }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.Err != nil || r.Stored != 1 {
		t.Errorf("queued batch: got %+v, want stored", r)
	}
	err = w.Submit(context.Background(), []Reading{{Device: "d", Metric: "m", TS: 2}}, func(Result) { t.Error("done called after stop") })
	if !errors.Is(err, ErrClosed) {
		t.Errorf("submit after stop: got %v, want ErrClosed", err)
	}
}

func TestWriter_CommitLargerThanOneTransaction(t *testing.T) {
	// A 1 MiB memtable takes about 1,600 entries per transaction: the
	// commit is written in parts, each with the reading count.
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	var rs []Reading
	for i := range 20000 {
		rs = append(rs, Reading{Device: "sim-0001", Metric: "temperature", TS: int64(i), Value: 21.5})
	}
	if res := write(t, w, rs...); res.Stored != len(rs) {
		t.Errorf("got %+v, want %d stored", res, len(rs))
	}
	cancel()
	<-done
	s = reopen(t, s)
	defer s.Close()
	if n := s.ReadingCount(); n != uint64(len(rs)) {
		t.Errorf("ReadingCount after reopen: got %d, want %d", n, len(rs))
	}
}

// TestTableSize: tables are half the memtable, at least 1 MiB, and
// large enough that a full store takes at most maxTables of them.
func TestTableSize(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, tc := range []struct {
		memTable, maxBytes, want int64
	}{
		{4 * mib, MaxDefaultDiskBytes, 2 * mib}, // the daemon's default
		{8 * mib, MaxDefaultDiskBytes, 4 * mib}, // the store package's default
		{1 * mib, MaxDefaultDiskBytes, 1 * mib}, // not 512 KiB
		{64 * mib, 16 * gib, 32 * mib},
		{2 * mib, 100 * gib, 4 * mib}, // 3.125 MiB, in whole MiB
		{8 * mib, 2000 * gib, 63 * mib},
	} {
		got := tableSize(tc.memTable, tc.maxBytes)
		if got != tc.want {
			t.Errorf("tableSize(%d MiB, %d GiB) = %d, want %d", tc.memTable/mib, tc.maxBytes/gib, got, tc.want)
		}
		if tc.maxBytes/got > maxTables {
			t.Errorf("tableSize(%d MiB, %d GiB) = %d: %d tables", tc.memTable/mib, tc.maxBytes/gib, got, tc.maxBytes/got)
		}
	}
}

// TestStore_OldestReadingSeeksOnlyAfterAPrune checks that the oldest
// reading follows commits without seeking the tree again, older readings
// of a new series among them, and is sought again once a prune has removed
// readings.
func TestStore_OldestReadingSeeksOnlyAfterAPrune(t *testing.T) {
	floor := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s, w := testStoreWith(t, "", WriterOptions{Retention: RetentionPolicy{RawMaxAge: 24 * time.Hour}})
	oldest := func() (int64, bool) {
		t.Helper()
		ts, ok, err := s.OldestReading()
		if err != nil {
			t.Fatal(err)
		}
		if want, _, wantOK, err := s.ReadingSpan(); err != nil || ok != wantOK || ok && ts != want {
			t.Fatalf("oldest reading %d (%v), the tree's %d (%v, %v)", ts, ok, want, wantOK, err)
		}
		return ts, ok
	}
	if _, ok := oldest(); ok {
		t.Fatal("an empty store has an oldest reading")
	}
	base := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var rs []Reading
	for h := range 3 * 24 {
		rs = append(rs, Reading{Device: "d", Metric: "m", TS: base + int64(h)*3600e9, Value: float64(h)})
	}
	write(t, w, rs...)
	if ts, _ := oldest(); ts != base {
		t.Errorf("oldest reading %s, want %s", time.Unix(0, ts).UTC(), time.Unix(0, base).UTC())
	}
	late := Reading{Device: "late", Metric: "m", TS: base - 3600e9, Value: 1}
	write(t, w, late)
	checkpoint(t, w)
	if ts, _ := oldest(); ts != late.TS {
		t.Errorf("oldest reading %s, want the late one's %s", time.Unix(0, ts).UTC(), time.Unix(0, late.TS).UTC())
	}
	s.oldestMu.Lock()
	sought := s.sought
	s.oldestMu.Unlock()
	if sought != 1 {
		t.Errorf("sought the oldest reading %d times, want once", sought)
	}

	r := NewRetention(s, w, RetentionOptions{Now: func() time.Time { return floor }})
	now := time.Unix(0, base+3*24*3600e9)
	if err := r.PruneAge(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if ts, _ := oldest(); ts != now.Add(-24*time.Hour).UnixNano() {
		t.Errorf("after the prune: oldest reading %s, want %s", time.Unix(0, ts).UTC(), now.Add(-24*time.Hour).UTC())
	}
	s.oldestMu.Lock()
	sought = s.sought
	s.oldestMu.Unlock()
	if sought != 2 {
		t.Errorf("sought the oldest reading %d times, want twice (once more after the prune)", sought)
	}
}

// Badger's warnings reach the store's logger with its component once, as
// a JSON handler writes them, and the library named.
func TestBadgerLogger_OneComponent(t *testing.T) {
	var out strings.Builder
	log := slog.New(slog.NewJSONHandler(&out, nil)).With("component", "store")
	badgerLogger{log}.Warningf("Block cache might be too small. Metrics: %s\n", "hit: 1")
	badgerLogger{log}.Errorf("compaction: %v", errors.New("disk full"))
	badgerLogger{log}.Infof("chatter")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (info dropped):\n%s", len(lines), out.String())
	}
	for i, want := range []string{"WARN", "ERROR"} {
		if n := strings.Count(lines[i], `"component"`); n != 1 {
			t.Errorf("line %d has the key component %d times: %s", i, n, lines[i])
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, lines[i])
		}
		if got["level"] != want || got["component"] != "store" || got["library"] != "badger" || strings.HasSuffix(got["msg"], "\n") {
			t.Errorf("line %d: got %v, want level %s, component store, library badger, no trailing newline", i, got, want)
		}
	}
}
