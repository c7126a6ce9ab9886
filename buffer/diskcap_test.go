package buffer

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRetention_DiskCapTakesTheOldestHours reaches the disk cap with six
// hours of readings of one UTC day. The cap must take the oldest hours
// only, each series' newest hour never, and leave every series a gapless
// tail of its readings, with the reading count true to the store.
func TestRetention_DiskCapTakesTheOldestHours(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, w := testStoreOpts(t, Options{MemTableSize: 1 << 20, Logger: log},
		WriterOptions{MaxReadings: 5000, SealCheck: time.Hour, Retention: RetentionPolicy{KeepRecent: time.Hour}})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const series, step, hours = 120, 4 * int64(time.Second), 6
	per := hours * int64(time.Hour) / step
	var rs []Reading
	for i := range per {
		for d := range series {
			rs = append(rs, Reading{Device: fmt.Sprintf("dev-%02d", d), Metric: "t", TS: base + i*step, Value: rng.Float64()})
			if len(rs) == 5000 {
				write(t, w, rs...)
				rs = rs[:0]
			}
		}
	}
	write(t, w, rs...)
	if err := w.SealDue(ctx, time.Unix(0, base+2*day)); err != nil {
		t.Fatal(err)
	}
	r := NewRetention(s, w, RetentionOptions{Logger: log})
	if err := r.compact(ctx, 0); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// A foreign file in the directory: reported, not counted, not deleted.
	foreign := filepath.Join(s.Dir(), "notes.txt")
	if err := os.WriteFile(foreign, []byte(strings.Repeat("x", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	total := s.ReadingCount()
	if total != uint64(series*per) {
		t.Fatalf("stored %d readings, want %d", total, series*per)
	}
	// A cap the store is just over: down to the low mark, a quarter goes.
	limit := int64(float64(st.DiskBytes) / 0.95)
	if err := w.SetRetentionPolicy(ctx, RetentionPolicy{MaxDiskBytes: limit, KeepRecent: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := r.EnforceDiskCap(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if float64(after.DiskBytes) > diskHighMark*float64(limit) {
		t.Errorf("after the cap: %d bytes, over the high mark of %d", after.DiskBytes, limit)
	}
	if after.ForeignBytes < 1<<20 || len(after.ForeignFiles) != 1 || after.ForeignFiles[0] != "notes.txt" {
		t.Errorf("foreign files: %d bytes in %q; want notes.txt, 1 MiB", after.ForeignBytes, after.ForeignFiles)
	}
	if !strings.Contains(logs.String(), "notes.txt") {
		t.Errorf("the foreign file was not logged:\n%s", logs.String())
	}

	var left uint64
	newest := base + (per-1)*step
	oldestLeft := newest
	for d := range series {
		dev := fmt.Sprintf("dev-%02d", d)
		got, err := s.Readings(Query{Device: dev, From: base, To: newest + 1, Limit: MaxQueryLimit})
		if err != nil {
			t.Fatal(err)
		}
		left += uint64(len(got))
		if len(got) == 0 {
			t.Fatalf("%s: every reading deleted", dev)
		}
		first := got[0].TS
		oldestLeft = min(oldestLeft, first)
		if first > newest-int64(time.Hour) {
			t.Errorf("%s: readings from %s kept; the newest hour must stay, and not only it", dev, time.Unix(0, first).UTC())
		}
		// What is left is the newest readings, without a gap.
		if want := (newest-first)/step + 1; int64(len(got)) != want {
			t.Errorf("%s: %d readings from %s on, want %d (a gap)", dev, len(got), time.Unix(0, first).UTC(), want)
		}
		if (first-base)%int64(time.Hour) != 0 {
			t.Errorf("%s: the first reading left is at %s, not on the hour: the cap takes whole hours", dev, time.Unix(0, first).UTC())
		}
	}
	t.Logf("%d readings, %d left (oldest %s); %d bytes, cap %d, after %d", total, left, time.Unix(0, oldestLeft).UTC(), st.DiskBytes, limit, after.DiskBytes)
	if oldestLeft == base {
		t.Errorf("nothing was deleted")
	}
	if left != s.ReadingCount() || total-left != w.Stats().PrunedReadings {
		t.Errorf("readings left %d, count %d; deleted %d, pruned counted %d", left, s.ReadingCount(), total-left, w.Stats().PrunedReadings)
	}
	// It stopped once under the low mark: readings older than the newest
	// hour are left.
	if oldestLeft >= newest-int64(time.Hour) {
		t.Errorf("only the newest hour is left (from %s): the cap went on past the low mark", time.Unix(0, oldestLeft).UTC())
	}
	if !strings.Contains(logs.String(), `msg="data directory back under the disk cap's low mark"`) {
		t.Errorf("no line saying the directory is back under the low mark:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `level=WARN msg="disk cap: deleted the oldest raw readings"`) {
		t.Errorf("no warning of what the cap deleted:\n%s", logs.String())
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("the foreign file: %v", err)
	}
}

// TestEffectiveCap checks the cap in force and what sets it: the disk cap
// while the file system has room for it beside the reserve and its
// resume margin, else what it has room for, and the reserve while less
// than it is free.
func TestEffectiveCap(t *testing.T) {
	const mib = 1 << 20
	reserve := int64(32 * mib) // resume margin: 4 MiB
	tests := []struct {
		name                  string
		limit, own, free, res int64
		want                  int64
		wantBy                DiskLimit
	}{
		{"no cap", 0, 10 * mib, 100 * mib, reserve, 0, LimitNone},
		{"room for the cap", 40 * mib, 10 * mib, 100 * mib, reserve, 40 * mib, LimitCap},
		{"the free space binds", 60 * mib, 10 * mib, 60 * mib, reserve, 34 * mib, LimitFree},
		{"exactly the cap", 40 * mib, 10 * mib, 66 * mib, reserve, 40 * mib, LimitCap},
		{"less than the reserve free", 47 * mib, 17 * mib, 30 * mib, reserve, 11 * mib, LimitReserve},
		{"nothing left", 47 * mib, 1 * mib, 0, reserve, 1, LimitReserve},
		{"no reserve", 40 * mib, 10 * mib, 0, -1, 40 * mib, LimitCap},
	}
	for _, tt := range tests {
		got, by := effectiveCap(tt.limit, tt.own, tt.free, tt.res)
		if got != tt.want || by != tt.wantBy {
			t.Errorf("%s: effectiveCap(%d, %d, %d, %d) = %d, %q; want %d, %q", tt.name, tt.limit, tt.own, tt.free, tt.res, got, by, tt.want, tt.wantBy)
		}
	}
}
