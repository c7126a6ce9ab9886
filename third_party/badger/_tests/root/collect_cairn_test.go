// cairn's regression test of patches/0004-compaction-collects-tables-from-the-start.patch:
// it fails without it (the compaction waits on itself). It holds the
// compaction with the hook of patches/0007-subcompaction-started-hook.patch,
// and uses the release's test helpers (levels_test.go), which
// scripts/badger.sh test copies in.

package badger

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dgraph-io/badger/v4/y"
)

// TestCompactionCollectsItsTablesFromTheStart: a compaction whose first
// subcompaction writes more tables than the channel that collects them
// holds (3), before the next subcompaction is started, still ends, with
// every key. The release collected the tables only once every
// subcompaction had started: the builders of the tables written waited to
// hand them over, holding the throttle slots that starting the next
// subcompaction waited for, and the compaction waited on itself for good.
// A busy scheduler can hold the compaction's goroutine that long after
// starting a subcompaction; the hook does it every time.
func TestCompactionCollectsItsTablesFromTheStart(t *testing.T) {
	dir := t.TempDir()
	// Small blocks and tables: each subcompaction writes a dozen or more.
	opt := DefaultOptions(dir).WithNumCompactors(0).WithCompactionBuilders(1).WithBlockSize(512)
	opt.managedTxns = true // reads see every version (getAllAndCheck)
	db, err := Open(opt)
	require.NoError(t, err)

	// 15 tables on level 1, whose compaction is split in 5, and one on
	// level 0 with a newer version of every key.
	const l1Tables, keysPerTable = 15, 200
	val := fmt.Sprintf("%064d", 0)
	var top, all []keyValVersion
	for i := range l1Tables {
		var kvs []keyValVersion
		for j := range keysPerTable {
			key := fmt.Sprintf("key%06d", i*keysPerTable+j)
			kvs = append(kvs, keyValVersion{key, val, 1, 0})
			top = append(top, keyValVersion{key, val, 2, 0})
			all = append(all, keyValVersion{key, val, 2, 0}, keyValVersion{key, val, 1, 0})
		}
		createAndOpen(db, kvs, 1)
	}
	createAndOpen(db, top, 0)
	getAllAndCheck(t, db, all)

	cdef := compactDef{
		thisLevel: db.lc.levels[0],
		nextLevel: db.lc.levels[1],
		top:       db.lc.levels[0].tables,
		bot:       db.lc.levels[1].tables,
		t:         db.lc.levelTargets(),
	}
	cdef.t.baseLevel = 1
	cdef.t.fileSz[1] = 2 << 10
	split := cdef
	db.lc.addSplits(&split)
	splits := len(split.splits)
	require.Greater(t, splits, 1, "the test needs a compaction split in several")

	// Once its first subcompaction has started, the compaction's goroutine
	// waits until that one has written as many tables as it can without
	// handing them over: one per throttle slot left (the throttle has one
	// per builder and one per subcompaction, and the first subcompaction
	// holds one), and the 3 the channel holds. Its range has more (the
	// others wait for a slot meanwhile). Then it starts the next.
	tables := func() int {
		names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
		if err != nil {
			t.Error(err) // called by the compaction's goroutine too: no FailNow
		}
		return len(names)
	}
	before := tables()
	want := opt.CompactionBuilders + splits - 1 + 3
	started := 0
	db.subcompactionStartedHook = func() {
		started++
		if started > 1 {
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		for tables()-before < want {
			if time.Now().After(deadline) {
				t.Errorf("the first subcompaction wrote %d tables in 10 s; the test needs %d", tables()-before, want)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}

	done := make(chan error, 1)
	go func() { done <- db.lc.runCompactDef(-1, 0, cdef) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		// The DB is left open: closing it would wait on the compaction.
		t.Fatalf("the compaction has not ended after 30 s: it waits on itself (%d subcompactions, %d of them started, %d tables written); its goroutines:\n%s",
			splits, started, tables()-before, compactionStacks())
	}
	require.Equal(t, splits, started, "subcompactions started")
	first := 0
	for _, tbl := range db.lc.levels[1].tables {
		if y.CompareKeys(tbl.Biggest(), split.splits[0].right) < 0 {
			first++
		}
	}
	require.Greater(t, first, want, "tables of the first subcompaction: its range must hold more than it can write without handing them over")
	getAllAndCheck(t, db, all)
	require.NoError(t, db.Close())
}

// compactionStacks returns the stacks of the goroutines of compactions.
func compactionStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var stacks []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "(*levelsController)") {
			stacks = append(stacks, g)
		}
	}
	return strings.Join(stacks, "\n\n")
}
