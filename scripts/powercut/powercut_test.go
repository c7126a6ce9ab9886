package powercut

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// Load of the power-cut cycles: each sensor is one MQTT connection with up
// to window messages in flight, so the group commit always has company.
const (
	cycleSensors = 4
	cycleWindow  = 8
	minLoad      = 200 * time.Millisecond
	maxLoad      = 1500 * time.Millisecond
)

// shape is the load and the store settings of a run of cycles.
type shape struct {
	sensors, window int
	store           string // YAML lines appended to cairn's config (store:, uplink:), if any
	// free, if not 0, puts the backing directory on a tmpfs of its own
	// with only this many bytes free when the epoch begins.
	free int64
}

// defaultShape is the shape of the main test and the control run.
func defaultShape() shape { return shape{sensors: cycleSensors, window: cycleWindow} }

// cyclesEnv overrides the number of cycles of TestPowerCut_AckedReadingsSurvive.
const cyclesEnv = "CAIRN_POWERCUT_CYCLES"

// TestPowerCut_AckedReadingsSurvive cuts the power under a loaded cairn
// again and again and checks after every restart that every reading a
// PUBACK acknowledged is in the store exactly once, and that the store
// opened.
func TestPowerCut_AckedReadingsSurvive(t *testing.T) {
	requirePowerCut(t)
	cycles := 20
	if s := os.Getenv(cyclesEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", cyclesEnv, s)
		}
		cycles = n
	}
	began := time.Now()
	var (
		acked, retried, retries, names int
		dropped, minDrop, maxDrop      int
		mostMissing, mostDoubled       int
		restartMax                     time.Duration
	)
	minDrop = -1
	runCycles(t, "acked", defaultShape(), cycles, false, -1, func(cycle int, r cycleResult) {
		acked += r.load.acked * perMessage
		if r.retries > 0 {
			retried++
		}
		retries += r.retries
		names += len(r.cut.names)
		dropped += r.cut.droppedBytes
		maxDrop = max(maxDrop, r.cut.droppedBytes)
		if minDrop < 0 || r.cut.droppedBytes < minDrop {
			minDrop = r.cut.droppedBytes
		}
		restartMax = max(restartMax, r.restart)
		ch := r.check
		mostMissing, mostDoubled = max(mostMissing, len(ch.missing)), max(mostDoubled, len(ch.doubled))
		t.Logf("cycle %d/%d: %s; store: %d readings, %d missing, %d doubled",
			cycle+1, cycles, r.summary(), ch.stored, len(ch.missing), len(ch.doubled))
		if problems := ch.problems(true); problems != "" {
			t.Fatalf("cycle %d/%d: the store after the power cut is wrong (with the group commit synced):\n%s\ncairn's log after the cut:\n%s",
				cycle+1, cycles, problems, r.restartLog)
		}
	})
	t.Logf("total: %d cycles in %s; readings acknowledged %d, missing %d, doubled %d (the most one check found); store opened after every cut: %d of %d (%d needed a retry, %d retries in all, restarts up to %s); cuts dropped %d bytes (%d to %d per cut); unsynced names reported %d",
		cycles, time.Since(began).Round(time.Millisecond), acked, mostMissing, mostDoubled,
		cycles, cycles, retried, retries, restartMax.Round(time.Millisecond), dropped, minDrop, maxDrop, names)
}

// TestPowerCut_SmallMemtable runs cycles with a 1 MiB memtable and many
// messages in flight: group commits are split across transactions, Badger
// switches memtables within a commit, and buckets are sealed all the time.
// Badger's Sync covers only the memtable being written, so every part of a
// split commit must be synced before the next one.
func TestPowerCut_SmallMemtable(t *testing.T) {
	requirePowerCut(t)
	const cycles = 8
	sh := shape{sensors: 16, window: 512, store: "store:\n  memtable_mib: 1\n  bucket_samples: 32\n"}
	acked := 0
	runCycles(t, "small", sh, cycles, false, -1, func(cycle int, r cycleResult) {
		acked += r.load.acked * perMessage
		ch := r.check
		t.Logf("small-memtable cycle %d/%d: %s; store: %d readings, %d missing, %d doubled",
			cycle+1, cycles, r.summary(), ch.stored, len(ch.missing), len(ch.doubled))
		if problems := ch.problems(true); problems != "" {
			t.Fatalf("small-memtable cycle %d/%d: the store after the power cut is wrong:\n%s\ncairn's log after the cut:\n%s",
				cycle+1, cycles, problems, r.restartLog)
		}
	})
	t.Logf("small-memtable total: cycles %d, readings acknowledged %d, missing 0, doubled 0", cycles, acked)
}

// TestPowerCut_WithUplink runs small-memtable cycles with two upstreams:
// one takes everything at once throughout; the other is down (503) for
// the first half of the cycles and takes everything after. The uplinks'
// own writes (the batch in flight, the cursors, deleting entries both have
// passed) go on beside the group commits, and must never come between a
// commit and the sync that makes it durable. After every cut, per
// upstream: it took nothing the store lost, and everything its cursor
// passed; while down, every stored reading is pending for it.
func TestPowerCut_WithUplink(t *testing.T) {
	requirePowerCut(t)
	live, late := newLineUpstream(), newLineUpstream()
	defer live.Close()
	defer late.Close()
	late.down.Store(true)
	const cycles, downCycles = 6, 3
	upstream := func(name, url string) string {
		return "  - name: " + name + "\n    kind: influx\n    url: " + url + "/write\n    batch_readings: 200\n    interval: 10ms\n    retry_wait_max: 1s\n"
	}
	sh := shape{sensors: 16, window: 512, store: "store:\n  memtable_mib: 1\n  bucket_samples: 32\n" +
		"uplink:\n" + upstream("live", live.URL) + upstream("late", late.URL)}
	acked := 0
	runCycles(t, "uplink", sh, cycles, false, -1, func(cycle int, r cycleResult) {
		acked += r.load.acked * perMessage
		ch := r.check
		down := cycle < downCycles
		l, d := live.check(r.sensors), late.check(r.sensors)
		t.Logf("uplink cycle %d/%d: %s; store: %d readings, %d missing, %d doubled; live upstream: %d batches, %d readings taken, %d pending; late upstream (down %v): %d batches, %d readings taken, %d pending",
			cycle+1, cycles, r.summary(), ch.stored, len(ch.missing), len(ch.doubled),
			l.batches, l.distinct, ch.cursors["live"].Pending(), down, d.batches, d.distinct, ch.cursors["late"].Pending())
		problems := ch.problems(true) + l.problems(ch, "live", false) + d.problems(ch, "late", down)
		if problems != "" {
			t.Fatalf("uplink cycle %d/%d: the store after the power cut is wrong:\n%s\ncairn's log after the cut:\n%s",
				cycle+1, cycles, problems, r.restartLog)
		}
		if cycle+1 == downCycles {
			late.down.Store(false)
		}
	})
	if live.batches() == 0 || late.batches() == 0 {
		t.Fatalf("the upstreams took %d and %d batches: the uplinks did not run beside the commits", live.batches(), late.batches())
	}
	t.Logf("uplink total: cycles %d, readings acknowledged %d, missing 0, doubled 0, batches taken %d (live) and %d (late, from cycle %d on)",
		cycles, acked, live.batches(), late.batches(), downCycles+1)
}

// controlMessages bounds the messages each sensor sends per control cycle,
// so that one cycle's readings stay well within one Badger memtable. Without
// the sync every memtable file of a run is empty after the cut, and each
// costs cairn one failed open: a second memtable would need more opens than
// cairn's start-up tries (see docs/reliability.md).
const controlMessages = 2500

// TestPowerCut_ControlLosesWithoutSync runs the same cycles with the group
// commit's fsync turned off. Acknowledged readings must then be lost, or the
// layer simulates nothing and the test above proves nothing.
func TestPowerCut_ControlLosesWithoutSync(t *testing.T) {
	requirePowerCut(t)
	const cycles = 5
	var losses []string
	lostCycles, acked, lost := 0, 0, 0
	runCycles(t, "control", defaultShape(), cycles, true, controlMessages, func(cycle int, r cycleResult) {
		ch := r.check
		n := ch.lostIn(cycle)
		t.Logf("control cycle %d/%d: %s; store: %d readings; %d of the %d readings acknowledged in this cycle lost, %d missing in all, %d doubled, %d half-stored messages",
			cycle+1, cycles, r.summary(), ch.stored, n, r.load.acked*perMessage, len(ch.missing), len(ch.doubled), len(ch.torn))
		if problems := ch.problems(false); problems != "" {
			t.Errorf("control cycle %d/%d: the store is wrong in more than lost readings:\n%s", cycle+1, cycles, problems)
		}
		if n > 0 {
			lostCycles++
		}
		acked += r.load.acked * perMessage
		lost += n
		losses = append(losses, strconv.Itoa(n))
	})
	t.Logf("control total: %d cycles without sync; acknowledged readings lost in %d of them: %s per cycle (%d of %d acknowledged)",
		cycles, lostCycles, strings.Join(losses, ", "), lost, acked)
	if lostCycles == 0 {
		t.Fatalf("no acknowledged reading was lost in %d power cuts without the group commit's sync: the layer simulates nothing", cycles)
	}
}

// cycleResult is what one power-cut cycle did and found.
type cycleResult struct {
	loadTime   time.Duration
	load       loadStats
	cut        cutReport
	retries    int           // failed opens of the store on the first start after the cut
	restart    time.Duration // from starting cairn after the cut to its "cairn started"
	restartLog string        // the output of that start
	check      storeCheck
	sensors    []*sensor // the epoch's, as the check left them
}

// summary describes the cycle up to the check.
func (r cycleResult) summary() string {
	names := r.cut.names
	more := ""
	if len(names) > 8 {
		names, more = names[:8], fmt.Sprintf(" and %d more", len(names)-8)
	}
	return fmt.Sprintf("load %s: %d messages sent (%d of them unacknowledged before), %d acknowledged (%d readings); cut dropped %d bytes in %d files, %d unsynced names [%s%s]; store opened with %d retries, cairn up in %s",
		r.loadTime.Round(time.Millisecond), r.load.sent, r.load.resent, r.load.acked, r.load.acked*perMessage,
		r.cut.droppedBytes, r.cut.droppedFiles, len(r.cut.names), strings.Join(names, "; "), more,
		r.retries, r.restart.Round(time.Millisecond))
}

// writeList writes to b how many items there are, what they are, and the
// first 20 of them, a line each.
func writeList(b *strings.Builder, what string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "%d %s:\n", len(items), what)
	for i, it := range items {
		if i == 20 {
			fmt.Fprintf(b, "\t… and %d more\n", len(items)-i)
			break
		}
		fmt.Fprintf(b, "\t%s\n", it)
	}
}

// problems describes what is wrong with the store; missing readings count
// only if strict.
func (ch storeCheck) problems(strict bool) string {
	var b strings.Builder
	list := func(what string, items []string) { writeList(&b, what, items) }
	if strict {
		missing := make([]string, len(ch.missing))
		for i, r := range ch.missing {
			missing[i] = r.String()
		}
		list("acknowledged readings missing", missing)
		list("acknowledged messages with only some of their readings stored", ch.torn)
		if ch.counted != uint64(ch.stored) {
			fmt.Fprintf(&b, "the store counts %d readings but lists %d\n", ch.counted, ch.stored)
		}
	}
	list("readings stored more than once", ch.doubled)
	list("readings stored that were never sent, or with another value", ch.unknown)
	list("warnings when the store was opened again after cairn stopped cleanly", ch.openWarn)
	return b.String()
}

// epochCycles is how many cycles share one store. Every cycle checks the
// whole store, so a long run starts afresh now and then to keep each check
// affordable.
const epochCycles = 50

// runCycles runs cycles of: cairn under load, SIGKILL, power cut, unmount,
// fresh mount of the same backing directory, cairn started again (the first
// open after the cut, which must succeed), cairn stopped cleanly, and a
// check of the store opened directly. It calls each after every cycle.
// Every epochCycles cycles it starts again with an empty store.
// Each sensor sends at most limit messages per cycle, resent ones included
// (limit < 0: no limit).
func runCycles(t *testing.T, name string, sh shape, cycles int, noSync bool, limit int, each func(cycle int, r cycleResult)) {
	t.Helper()
	for first := 0; first < cycles; first += epochCycles {
		runEpoch(t, name, sh, first, min(cycles, first+epochCycles), noSync, limit, each)
	}
}

// runEpoch runs the cycles from first to end on a new store.
func runEpoch(t *testing.T, name string, sh shape, first, end int, noSync bool, limit int, each func(cycle int, r cycleResult)) {
	t.Helper()
	backing, mnt := t.TempDir(), t.TempDir()
	if sh.free > 0 {
		nearlyFull(t, backing, sh.free)
	}
	dataDir := filepath.Join(mnt, "data")
	cfg := writeConfig(t, dataDir, sh.store)
	sensors := newSensors(sh.sensors, name)
	fs := mountCutfs(t, backing, mnt)
	for cycle := first; cycle < end; cycle++ {
		var r cycleResult
		p := startCairn(t, cfg, noSync)
		r.loadTime, r.load = runLoad(t, p, sensors, sh.window, cycle, limit)
		r.cut = fs.cut(t)
		fs.Unmount(t, stopTimeout)

		fs = mountCutfs(t, backing, mnt)
		p = startCairn(t, cfg, noSync)
		r.restart, r.retries, r.restartLog = p.StartTime, p.openRetries(), p.Out.String()
		if r.retries > 0 && len(p.Out.Matching(openRepairedMsg)) == 0 {
			t.Errorf("cycle %d: the store's open was retried %d times, but cairn did not log %q\noutput:\n%s", cycle+1, r.retries, openRepairedMsg, p.Out)
		}
		st := p.status(t)
		p.shutdown(t)
		var err error
		if r.check, err = checkStore(dataDir, sensors); err != nil {
			t.Fatalf("cycle %d: check the store: %v\ncairn's log after the cut:\n%s", cycle+1, err, r.restartLog)
		}
		if r.check.counted != p.Readings || st.Store.Readings != p.Readings {
			t.Errorf("cycle %d: cairn said it started with %d readings and its status says %d, the store counts %d", cycle+1, p.Readings, st.Store.Readings, r.check.counted)
		}
		r.sensors = sensors
		each(cycle, r)
	}
	fs.Unmount(t, stopTimeout)
	if sh.free > 0 {
		return // the tmpfs goes with the test
	}
	// The next epoch has its own; this one's store is done with.
	if err := os.RemoveAll(backing); err != nil {
		t.Fatal(err)
	}
}

// nearlyFull mounts a new ext4 file system on dir (unmounted when the test
// ends) and fills it with a file so that free bytes are left. Not tmpfs:
// cutfs tells files apart by inode number and birth time, and tmpfs has
// no birth time.
func nearlyFull(t *testing.T, dir string, free int64) {
	t.Helper()
	testkit.MountFSOn(t, "ext4", 256<<20, dir)
	testkit.Fill(t, filepath.Join(dir, "filler"), free)
}

// TestPowerCut_NearlyFullDisk runs small-memtable cycles on a file system
// with little more free than the store's reserve: the files Badger
// allocates up front, and the pause before a full disk, must not cost an
// acknowledged reading in a power cut.
func TestPowerCut_NearlyFullDisk(t *testing.T) {
	requirePowerCut(t)
	const cycles = 6
	// The reserve (32 MiB at this memtable), its file (4 MiB), and room
	// for the cycles' readings.
	sh := shape{sensors: 16, window: 512, store: "store:\n  memtable_mib: 1\n  bucket_samples: 32\n", free: 80 << 20}
	acked := 0
	runCycles(t, "nearly-full", sh, cycles, false, -1, func(cycle int, r cycleResult) {
		acked += r.load.acked * perMessage
		ch := r.check
		t.Logf("nearly-full cycle %d/%d: %s; store: %d readings, %d missing, %d doubled",
			cycle+1, cycles, r.summary(), ch.stored, len(ch.missing), len(ch.doubled))
		if problems := ch.problems(true); problems != "" {
			t.Fatalf("nearly-full cycle %d/%d: the store after the power cut is wrong:\n%s\ncairn's log after the cut:\n%s",
				cycle+1, cycles, problems, r.restartLog)
		}
	})
	t.Logf("nearly-full total: cycles %d, readings acknowledged %d, missing 0, doubled 0", cycles, acked)
}

// runLoad publishes from every sensor to cairn (at most limit messages each,
// unless limit < 0) for a random time and until at least one message
// of this cycle was acknowledged, then SIGKILLs cairn and returns how long
// the load ran and what it did.
func runLoad(t *testing.T, p *cairnProc, sensors []*sensor, window, cycle, limit int) (time.Duration, loadStats) {
	t.Helper()
	began := time.Now()
	load := startLoad(sensors, p.MQTT, cycle, window, limit)
	halt := sync.OnceValues(func() (loadStats, error) { return load.halt(ackTimeout + stopTimeout) })
	t.Cleanup(func() { // on failure before the kill
		if _, err := halt(); err != nil {
			t.Logf("cycle %d: publishers: %v", cycle+1, err)
		}
	})
	timer := time.NewTimer(minLoad + rand.N(maxLoad-minLoad))
	select {
	case <-timer.C:
	case <-load.done:
		timer.Stop()
	}
	deadline := time.Now().Add(ackTimeout)
	for !load.ended() && ackedIn(sensors, cycle) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if load.ended() { // its errors are safe to read
		if err := errors.Join(load.errs...); err != nil || limit < 0 {
			t.Fatalf("cycle %d: the publishers stopped before the kill: %v\ncairn's output:\n%s", cycle+1, err, p.Out)
		}
	}
	if ackedIn(sensors, cycle) == 0 {
		t.Fatalf("cycle %d: no PUBACK within %s of load\ncairn's output:\n%s", cycle+1, time.Since(began).Round(time.Millisecond), p.Out)
	}
	loadTime := time.Since(began)
	p.kill(t)
	// The connections are gone: every PUBACK that will come is in.
	st, err := halt()
	if err != nil {
		t.Fatalf("cycle %d: %v", cycle+1, err)
	}
	return loadTime, st
}

// ackedIn returns how many messages were acknowledged in cycle.
func ackedIn(sensors []*sensor, cycle int) int {
	n := 0
	for _, s := range sensors {
		n += s.acked(cycle)
	}
	return n
}

// Load of the ingest-rate measurement.
const (
	rateSensors  = 4
	rateWindow   = 64
	rateMessages = 5000 // per sensor and run
	rateRounds   = 3    // runs on each side, alternating
)

// TestPowerCut_IngestSlowdown publishes the same number of messages, as fast
// as they are acknowledged, to cairn on a plain directory and to cairn on the
// power-cut layer, alternating, and logs the rates and commit times. It
// asserts nothing about speed.
func TestPowerCut_IngestSlowdown(t *testing.T) {
	requirePowerCut(t)
	backing, mnt := t.TempDir(), t.TempDir()
	fs := mountCutfs(t, backing, mnt)
	var plain, layered []ingestRun
	for round := range rateRounds {
		plain = append(plain, measureIngest(t, fmt.Sprintf("plain-%d", round), filepath.Join(t.TempDir(), "data")))
		layered = append(layered, measureIngest(t, fmt.Sprintf("layer-%d", round), filepath.Join(mnt, fmt.Sprintf("data-%d", round))))
	}
	fs.Unmount(t, stopTimeout)
	race := ""
	if testkit.RaceEnabled() {
		race = "; this test process, the publisher, runs with the race detector, so the rates are partly its own"
	}
	p, l := medianRun(plain), medianRun(layered)
	t.Logf("ingest rate: %d runs of %d messages (%d readings) on each side; median plain directory %.0f messages/s (%d commits, %.2f ms each), on the power-cut layer %.0f messages/s (%d commits, %.2f ms each); plain/layer rate ratio %.2f; all runs plain %s, layer %s%s",
		rateRounds, rateSensors*rateMessages, rateSensors*rateMessages*perMessage,
		p.rate, p.commits, p.commitMs, l.rate, l.commits, l.commitMs, p.rate/l.rate, rates(plain), rates(layered), race)
}

// ingestRun is one run of measureIngest.
type ingestRun struct {
	rate     float64 // messages acknowledged per second
	commits  uint64  // group commits
	commitMs float64 // mean time of a group commit, sync included
}

// medianRun returns the run with the median rate.
func medianRun(runs []ingestRun) ingestRun {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b ingestRun) int { return cmp.Compare(a.rate, b.rate) })
	return s[len(s)/2]
}

func rates(runs []ingestRun) string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = strconv.FormatFloat(r.rate, 'f', 0, 64)
	}
	return strings.Join(out, "/")
}

// measureIngest starts cairn on dataDir, publishes rateMessages from each
// of rateSensors sensors, and returns the rate and cairn's commit figures.
func measureIngest(t *testing.T, name, dataDir string) ingestRun {
	t.Helper()
	p := startCairn(t, writeConfig(t, dataDir, ""), false)
	sensors := newSensors(rateSensors, name)
	errs := make([]error, len(sensors))
	stats := make([]loadStats, len(sensors))
	began := time.Now()
	var wg sync.WaitGroup
	for i, s := range sensors {
		wg.Go(func() { stats[i], errs[i] = s.publish(p.MQTT, 0, rateWindow, rateMessages, nil) })
	}
	wg.Wait()
	elapsed := time.Since(began)
	acked := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: sensor %d: %v\ncairn's output:\n%s", name, i, err, p.Out)
		}
		acked += stats[i].acked
	}
	if want := rateSensors * rateMessages; acked != want {
		t.Fatalf("%s: %d messages acknowledged, want %d", name, acked, want)
	}
	st := p.status(t)
	p.shutdown(t)
	return ingestRun{rate: float64(acked) / elapsed.Seconds(), commits: st.Store.Commits, commitMs: st.Store.CommitMillis}
}
