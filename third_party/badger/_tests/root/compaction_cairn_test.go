// cairn's regression test of patches/0002-compaction-fails-on-a-table-not-written.patch:
// it fails on the release. It uses the release's test helpers
// (levels_test.go, db_test.go), which scripts/badger.sh test copies in.

package badger

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dgraph-io/badger/v4/table"
)

// TestCompactionFailsOnATableNotWritten: a compaction whose new table
// cannot be created fails, and leaves its input tables, with every key,
// in place. The release ended such a compaction without an error and
// without the table: its keys were gone.
func TestCompactionFailsOnATableNotWritten(t *testing.T) {
	opt := DefaultOptions("").WithNumCompactors(0).WithNumVersionsToKeep(1)
	opt.managedTxns = true
	runBadgerTest(t, &opt, func(t *testing.T, db *DB) {
		createAndOpen(db, []keyValVersion{{"foo", "bar", 3, 0}, {"fooz", "baz", 1, 0}}, 0)
		createAndOpen(db, []keyValVersion{{"foo", "bar", 2, 0}}, 0)
		createAndOpen(db, []keyValVersion{{"foo", "bar", 1, 0}}, 1)
		db.SetDiscardTs(10)
		all := []keyValVersion{{"foo", "bar", 3, 0}, {"foo", "bar", 2, 0}, {"foo", "bar", 1, 0}, {"fooz", "baz", 1, 0}}
		getAllAndCheck(t, db, all)

		// The compaction's tables get the next file IDs: files of those
		// names already there make creating them fail.
		next := db.lc.nextFileID.Load()
		var blocks []string
		for id := next; id < next+4; id++ {
			name := table.NewFilename(id, db.opt.Dir)
			require.NoError(t, os.WriteFile(name, nil, 0o600))
			blocks = append(blocks, name)
		}
		cdef := compactDef{
			thisLevel: db.lc.levels[0],
			nextLevel: db.lc.levels[1],
			top:       db.lc.levels[0].tables,
			bot:       db.lc.levels[1].tables,
			t:         db.lc.levelTargets(),
		}
		cdef.t.baseLevel = 1
		require.Error(t, db.lc.runCompactDef(-1, 0, cdef), "a compaction whose table could not be created")
		for _, name := range blocks {
			require.NoError(t, os.Remove(name))
		}
		getAllAndCheck(t, db, all)
	})
}
