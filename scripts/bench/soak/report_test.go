package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLastHalf_Slope fits a line through the last half's samples only:
// a series that climbs in the first half and then rises 2 a hour has a
// slope of 2 a hour, and its range and mean are the last half's.
func TestLastHalf_Slope(t *testing.T) {
	s := &settings{duration: time.Hour}
	var all []sample
	for m := 0; m <= 60; m++ {
		v := 100 + 2*float64(m)/60
		if m < 30 {
			v = float64(m) // the first half is not judged
		}
		all = append(all, sample{t: float64(m * 60), rssMiB: v})
	}
	f := lastHalf(s, all, func(x sample) float64 { return x.rssMiB })
	if f.n != 31 || math.Abs(f.slope-2) > 1e-9 || math.Abs(f.min-101) > 1e-9 || math.Abs(f.max-102) > 1e-9 {
		t.Fatalf("fit %+v, want 31 samples, slope 2, min 101, max 102", f)
	}
}

// TestFigures_Rules: a flat series passes each rule and a leaking one
// fails it; a backlog left over after the outage fails.
func TestFigures_Rules(t *testing.T) {
	s := &settings{duration: time.Hour, sample: time.Minute, outageAt: 20 * time.Minute, outage: 10 * time.Minute, capBytes: 24 << 20}
	run := func(leak float64, pendingAtEnd float64) map[string]bool {
		var all []sample
		for m := 0; m <= 60; m++ {
			h := float64(m) / 60
			all = append(all, sample{t: float64(m * 60), rssMiB: 40 + leak*h, goroutines: 40 + leak*h, fds: 20 + leak*h,
				storeMiB: 12 + leak*h, commitMS: 1 + leak*h/10})
		}
		all[len(all)-1].pending = pendingAtEnd
		out := map[string]bool{}
		for _, r := range analyse(s, all) {
			out[r.s.key] = r.flat
		}
		return out
	}
	for k, flat := range run(0, 0) {
		if !flat {
			t.Errorf("%s: a flat series judged not flat", k)
		}
	}
	leaking := run(20, 5000)
	for _, k := range []string{"rss_mib", "goroutines", "open_files", "store_disk_mib", "pending_readings", "commit_ms"} {
		if leaking[k] {
			t.Errorf("%s: a series growing 20 an hour (and 5,000 pending at the end) judged flat", k)
		}
	}
}

// TestFigures_RSSSawtooth: VmRSS that rises by 8 MiB at each memtable
// flush and falls back is flat, whatever its range; the same sawtooth on
// a leak of 2 MiB an hour is not, nor one whose highs climb in the last
// quarter while its lows stay. Pages of the store's files that Badger
// maps, growing with the store, are not judged; a leak under them is.
func TestFigures_RSSSawtooth(t *testing.T) {
	s := &settings{duration: time.Hour, sample: time.Minute, outageAt: 20 * time.Minute, outage: 10 * time.Minute, capBytes: 24 << 20}
	flatWith := func(rss, store func(m int) float64) bool {
		var all []sample
		for m := 0; m <= 60; m++ {
			all = append(all, sample{t: float64(m * 60), rssMiB: rss(m) + store(m), rssStoreMiB: store(m)})
		}
		for _, r := range analyse(s, all) {
			if r.s.key == "rss_mib" {
				return r.flat
			}
		}
		t.Fatal("no rss_mib in the report")
		return false
	}
	noStore := func(int) float64 { return 0 }
	flat := func(rss func(m int) float64) bool { return flatWith(rss, noStore) }
	saw := func(m int) float64 { return 32 + float64(m%6)*8/5 }    // 32 to 40 MiB every 6 minutes
	growing := func(m int) float64 { return 2 + 10*float64(m)/60 } // the store's tables, 10 MiB/h
	if !flatWith(saw, growing) {
		t.Error("a repeating sawtooth beside the store's mapped tables growing 10 MiB/h judged not flat")
	}
	if flatWith(func(m int) float64 { return saw(m) + 2*float64(m)/60 }, growing) {
		t.Error("a sawtooth on a leak of 2 MiB/h beside the store's mapped tables judged flat")
	}
	if !flat(saw) {
		t.Error("a repeating sawtooth of 32-40 MiB judged not flat")
	}
	if flat(func(m int) float64 { return saw(m) + 2*float64(m)/60 }) {
		t.Error("a sawtooth on a leak of 2 MiB/h judged flat")
	}
	if flat(func(m int) float64 {
		if m >= 45 && m%6 == 5 {
			return 46 // highs 6 MiB above the third quarter's
		}
		return saw(m)
	}) {
		t.Error("a sawtooth whose highs climb in the last quarter judged flat")
	}
}

// TestReplot reads back the CSV rows the soak writes and draws a plot
// with one panel a series and the outage marked.
func TestReplot(t *testing.T) {
	s := &settings{duration: 6 * time.Minute, sample: time.Minute, outageAt: 2 * time.Minute, outage: time.Minute, capBytes: 24 << 20}
	dir := t.TempDir()
	rows := []string{csvHeader}
	var want []sample
	for m := 0; m <= 6; m++ {
		// Commit time that follows the steal, as on a shared VM.
		x := sample{t: float64(m * 60), rssMiB: 40.5, hwmMiB: 41, goroutines: 43, fds: 20, dirMiB: 11, storeMiB: 11, pending: 150,
			commitMS: 1 + 0.25*float64(m%3), upOK: 1, stealPct: 0.5 + float64(m%3), cairnCPUPct: 3.5}
		want = append(want, x)
		rows = append(rows, x.csv())
	}
	csvFile := filepath.Join(dir, "soak.csv")
	if err := os.WriteFile(csvFile, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := replot(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[4] != want[4] {
		t.Fatalf("read back %d samples, [4] = %+v; want %d, %+v", len(got), got[4], len(want), want[4])
	}
	if line, want := noiseLine(got), "steal_pct mean=1.50 max=2.50 (of all CPUs' time) cairn_cpu_pct mean=3.50 (of a core); commit_ms against steal_pct r=1.00 n=6"; !strings.Contains(line, want) {
		t.Errorf("noise line %q, want it to say %q", line, want)
	}

	// A soak.csv written before the noise columns reads back without them.
	old := []string{csvHeaderOld}
	for _, r := range rows[1:] {
		f := strings.Split(r, ",")
		old = append(old, strings.Join(f[:17], ","))
	}
	if err := os.WriteFile(csvFile, []byte(strings.Join(old, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gotOld, err := replot(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotOld) != len(want) || gotOld[4].commitMS != want[4].commitMS || !math.IsNaN(gotOld[4].stealPct) {
		t.Fatalf("read back %d samples of the old format, [4] = %+v; want %d, %+v without steal", len(gotOld), gotOld[4], len(want), want[4])
	}
	if line := noiseLine(gotOld); !strings.Contains(line, "not in this soak.csv") {
		t.Errorf("noise line of the old format %q", line)
	}
	svg := plot(s, got, analyse(s, got))
	if n := strings.Count(svg, "<polyline"); n != 8 { // 6 series, 2 with a second line
		t.Errorf("plot has %d polylines, want 8", n)
	}
	if n := strings.Count(svg, `fill="#f6e0e0"`); n != 6 {
		t.Errorf("plot marks the outage in %d panels, want 6", n)
	}
}

// TestProcReads reads this process's own /proc: VmRSS and its parts in
// one read, and the resident pages of a file it maps.
func TestProcReads(t *testing.T) {
	mem, err := statusKiB(os.Getpid(), "VmRSS", "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		t.Fatal(err)
	}
	if mem[0] <= 0 || mem[1] < mem[0] || mem[2] <= 0 || mem[2]+mem[3] > mem[0]+64 {
		t.Errorf("VmRSS, VmHWM, RssAnon, RssFile = %v kB", mem)
	}
	if _, err := statusKiB(os.Getpid(), "NoSuchKey"); err == nil {
		t.Error("no error for a key /proc/PID/status does not have")
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "mapped"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 1 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	for i := 0; i < size; i += 4096 {
		b[i] = 1 // resident
	}
	kib, err := mappedKiB(os.Getpid(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if kib != size/1024 {
		t.Errorf("mapped %v KiB of files under the directory, want %d", kib, size/1024)
	}
	if other, err := mappedKiB(os.Getpid(), filepath.Join(dir, "other")); err != nil || other != 0 {
		t.Errorf("mapped %v KiB (%v) under a directory that maps nothing, want 0", other, err)
	}
}
