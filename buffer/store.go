// Package buffer is cairn's durable store: readings of every series kept in
// one Badger database under device-partitioned, time-ordered keys, written
// by a single group-committing Writer and read by range and latest queries.
//
// Durability: a reading is on disk once the Writer has called its done
// function without an error; until then nothing about it is promised.
// Badger runs with a low-memory profile for small boards, and no value is
// ever large enough to reach Badger's value log, which is not safe across a
// power cut (values of a transaction being synced can read back empty).
package buffer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unique"

	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
	"github.com/cairn-gateway/cairn/third_party/badger/options"
)

// Options configure a Store. The zero value of every field but Dir is a sane
// default.
type Options struct {
	// Dir is the data directory; it is created if missing.
	Dir string
	// MemTableSize is Badger's memtable size in bytes (default 8 MiB). The
	// whole store needs roughly 3× this plus the block cache's fixed part.
	MemTableSize int64
	// CacheSize is the cost Badger's block cache may hold (default 8
	// MiB). The tables are not compressed, so a cached block points into
	// its table's mapped file and holds about 250 bytes of heap; it costs
	// its bytes (patch 0020 of cairn's copy of Badger), so a MiB holds
	// about 16 blocks of 64 KiB (a full block costs a little more, a
	// table's last block less): about 4 KiB of heap a MiB.
	CacheSize int64
	// MaxBytes is how large the data directory may grow, which sets how
	// large Badger's tables are (tableSize): the disk cap; 0 when it is
	// not known yet, for the default cap's ceiling (MaxDefaultDiskBytes);
	// below 0 for no cap, for the file system's size.
	MaxBytes int64
	// NoSync skips the fsync of each group commit. It exists only for the
	// power-cut test's control run: with it set, acknowledged readings are
	// not durable.
	NoSync bool
	// Logger receives Badger's warnings and errors and the store's own
	// events. Nil means discard.
	Logger *slog.Logger
}

const (
	defaultMemTableSize = 8 << 20
	// maxValueThreshold is the largest value threshold Badger takes.
	maxValueThreshold = 1 << 20
	// tableBlockSize is the size of the blocks of Badger's tables, and
	// maxEntrySize bounds the journal and outbox entries (before their
	// compression) so that one fits a block. A table builder that meets
	// a value larger than a block doubles the block's buffer until it
	// fits: a table of such values took about four times its size, and
	// Badger then kept 8 builders for reuse, each grown to the largest
	// table it built. With entries up to the value threshold (512 KiB at
	// the default memtable), a 10 M-reading backlog peaked at 139 MiB
	// RSS; with entries of a block, 98 MiB. A builder allocates each
	// block's buffer at the block size plus 256 bytes of padding (see
	// Open): 64 KiB less that, so that the buffer is 64 KiB, not nine
	// pages of the Go heap's 8 KiB for 64 KiB and 256 bytes (an eighth
	// more).
	tableBlockSize = 64<<10 - 256
	// valueLogFileSize is the size of Badger's value-log files, the least
	// it takes: no value goes there (see maxValueThreshold), and each
	// file, of twice this size, is allocated whole when it is created so
	// that a full disk is an error, not a fault.
	valueLogFileSize = 1 << 20
	maxEntrySize     = 48 << 10
	defaultCacheSize = 8 << 20
)

// Store is an open data directory. Its methods are safe for concurrent use;
// writes go through a Writer, of which there must be one per Store.
type Store struct {
	db     *badger.DB
	dir    string
	noSync bool
	log    *slog.Logger
	// memTable is Badger's memtable size in bytes.
	memTable int64
	// maxEntry bounds a journal or outbox entry (maxEntrySize).
	maxEntry int
	// maxValue is the largest value the store may write: anything larger
	// would go to the value log.
	maxValue int

	mu sync.RWMutex // guards series, devices, the seriesIndex of each series, readings, uncompacted and oldest*
	// series maps a series id (device 0x00 metric) to its state. It is
	// loaded at Open; after that only the Writer adds to it.
	series map[string]*seriesState
	// texts holds the dictionaries of text series (text.go); a number
	// series has none. textsOrphan holds, while Open replays the log,
	// those of series not in the index yet.
	texts       map[*seriesState]*textDict
	textsOrphan map[string]*textDict
	// devices maps a device name to its series' shared name and count
	// (series.go); kept with series.
	devices     map[string]*deviceSeries
	readings    uint64 // distinct readings stored
	uncompacted uint64 // readings deleted since the last compaction (meta)
	// oldest is the oldest reading's timestamp (math.MaxInt64: none) as
	// OldestReading last sought it, lowered by every commit since; valid
	// until a prune removes readings, which counts oldestGen up, or until
	// oldestUntil if that is set (the seek could not see everything).
	oldest      int64
	oldestValid bool
	oldestGen   uint64
	oldestUntil time.Time
	schema      uint64 // keyspace version of the directory as opened (0: none recorded)

	outbox outbox // what the uplink has still to send (outbox.go)
	// syncMu is held from a write's commit through the sync that must
	// cover it: db.Sync syncs only the memtable being written, and a write
	// in between could start a new one.
	syncMu sync.Mutex

	oldestMu sync.Mutex // one OldestReading seeks at a time
	sought   int        // how many times it did; guarded by oldestMu

	flushMu sync.Mutex
	running *Writer // the Writer whose Run is under way, nil when none runs: queries read its journal (unflushed.go) and find the latest readings (latest.go)

	diskMu sync.Mutex // one measurement of the data directory at a time; guards disk
	disk   diskUsage  // the last measurement (usage.go)
}

// seriesState is what the store keeps in memory about one series, in one
// allocation of two parts with different owners: its entry in the index
// (seriesIndex), which the Store shares under Store.mu, and the Writer's
// own work on it (seriesWork), which only the Writer's goroutine touches.
// Each part's methods are on its own type.
type seriesState struct {
	seriesIndex
	seriesWork
}

// seriesIndex is a series' entry in the store's index. device and metric
// never change once the series exists; the other fields are written by
// the Writer's goroutine under Store.mu (for writing), and read by
// queries and the status under Store.mu (the Writer's goroutine reads
// them without it: it is their only writer).
type seriesIndex struct {
	last int64 // newest timestamp stored
	// rolled holds, for hours and days, the end of the groups whose
	// records are rolled up: hours and days before it have records (where
	// they hold readings), later ones only minute (hour) records.
	rolled [2]int64

	device, metric string
	// unit is the series' unit (unit.go); the zero handle when not known.
	unit unique.Handle[string]
}

// seriesWork is the Writer's work on one series: what it has written,
// holds in the journal and keeps open. Used by the Writer's goroutine
// only (and by Open, before any Writer runs), never under Store.mu.
type seriesWork struct {
	next       int64      // newest timestamp written, maybe not yet committed
	open       []openDay  // committed points not yet sealed, by UTC day (see open.go)
	pend       []Sample   // points of the commit part under way
	unflushed  []Sample   // points in the journal, not yet in runs (journal.go)
	flushed    bool       // in the sealer's flushed list (seal.go)
	touched    bool       // written in the current commit
	text       bool       // a text series, committed (text.go)
	pendDay    int32      // the day of the last of them
	pendRun    int32      // how many of them the run of that day holds, as reserveRun counts
	sealedLast int64      // newest timestamp in a sealed bucket
	stats      [3]StatsAt // newest committed record of each level, minute first
	// lastWrite is when the series last got a new reading, in ns since
	// the epoch (a time.Time would take 16 bytes more, and 32 with the
	// rest of the struct's size class).
	lastWrite int64
}

func newSeriesState(device, metric string, now time.Time) *seriesState {
	return &seriesState{
		seriesIndex: seriesIndex{
			last:   math.MinInt64,
			device: device,
			metric: metric,
			rolled: [2]int64{math.MinInt64, math.MinInt64},
		},
		seriesWork: seriesWork{
			next:       math.MinInt64,
			sealedLast: math.MinInt64,
			lastWrite:  now.UnixNano(),
		},
	}
}

// Open opens or creates the store in opts.Dir.
//
// After a power cut Badger may refuse to open a directory whose newest
// memtable or value-log file was never synced (it is empty); Open logs the
// error and opens again, which succeeds.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("open store: no data directory")
	}
	if opts.MemTableSize <= 0 {
		opts.MemTableSize = defaultMemTableSize
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = defaultCacheSize
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = MaxDefaultDiskBytes
	}
	if maxBytes < 0 {
		var fs syscall.Statfs_t
		if err := syscall.Statfs(opts.Dir, &fs); err != nil {
			return nil, fmt.Errorf("open store: size of the file system of %s: %w", opts.Dir, err)
		}
		maxBytes = int64(fs.Blocks) * int64(fs.Bsize) // Bsize is an int32 on 32-bit ARM
	}
	// Values must stay in the LSM tree. Badger allows a threshold of up to
	// 15% of the memtable size, and 1 MiB.
	maxValue := int(min(opts.MemTableSize/8, maxValueThreshold))
	bopts := badger.DefaultOptions(opts.Dir).
		WithLogger(badgerLogger{log}).
		WithSyncWrites(false).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithMemTableSize(opts.MemTableSize).
		WithNumMemtables(2).
		WithBaseTableSize(tableSize(opts.MemTableSize, maxBytes)).
		WithBaseLevelSize(opts.MemTableSize).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		WithCompactionBuilders(compactionBuilders).
		WithTableBuilderPool(tableBuilderPool).
		WithCompactL0OnClose(true).
		WithBlockCacheSize(opts.CacheSize).
		// Badger reads a table's index through the cache only for
		// encrypted tables; cairn's index is read from the mapped file.
		// The cache held 0.3 MB of its own for nothing.
		WithIndexCacheSize(0).
		WithCompression(options.None).
		WithValueThreshold(int64(maxValue)).
		WithBlockSize(tableBlockSize).
		WithValueLogFileSize(valueLogFileSize).
		WithNumGoroutines(2)
	// Tables of every level the same size: a table builder held its
	// table in memory (until patch 0016 of cairn's copy of Badger: it
	// now writes each block to its file as it finishes it), so tables
	// that doubled per level made memory grow with the store.
	//
	// A base level (the level that level 0 compacts into) of one
	// memtable: every level-0 table spans the whole keyspace, so each
	// compaction out of level 0 rewrites the whole base level, and
	// holds what it writes in memory (builders, and the new tables'
	// mapped pages) until it ends. At four memtables, a 10 M-reading
	// backlog peaked 15 MiB higher (one run each).
	//
	// Few table builders (options of cairn's copy of Badger, see
	// third_party/badger/CAIRN.md): a compaction fills one builder per
	// subcompaction and hands each full one to a goroutine that writes
	// its table to disk. Upstream lets 8 wait on the disk at once, and
	// keeps 8 buffers for reuse; a compaction of a large store writes
	// dozens of tables, so the builders alive grew with the store (3 or 4
	// at 1 M readings of backlog, 8 by 16 M, each a buffer of twice a
	// table). One writing bounds it whatever the store's size, and none
	// kept: without a pool of buffers, a builder allocates each block on
	// its own (patch 0013) and held about its table, where a pooled
	// buffer began at twice the table size and grew by twice that again
	// for a flushed memtable's table (about twice the table size): 6 MiB
	// for 2.2 MiB of table, kept. Since patch 0016 the flush's and the
	// compactions' builders write each block to the table's file as they
	// finish it and hold one block.
	//
	// No block compression: what fills the store is compressed already
	// (sealed buckets, outbox entries), and a compressing builder holds
	// each block twice, raw and compressed, at the worst case's size
	// (in buffers Badger kept for reuse, when it did). A 10 M-reading backlog peaked
	// 30 MiB higher with Snappy. The cost is disk: about a fifth more
	// bytes, for the keys and the minute records (docs/storage.md).
	bopts.TableSizeMultiplier = 1

	if err := releaseReserveToOpen(opts.Dir, openNeed(opts.MemTableSize), log); err != nil {
		log.Warn("could not check the free space before opening the store", "err", err)
	}
	db, err := openBadger(bopts, log)
	if err != nil {
		if isNoSpace(err) {
			err = fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		return nil, fmt.Errorf("open store %s: %w", opts.Dir, err)
	}
	s := &Store{
		db:       db,
		dir:      opts.Dir,
		noSync:   opts.NoSync,
		log:      log,
		memTable: opts.MemTableSize,
		maxValue: maxValue,
		maxEntry: min(maxValue, maxEntrySize),
		series:   make(map[string]*seriesState),
		devices:  make(map[string]*deviceSeries),
		oldest:   math.MaxInt64,
	}
	for _, step := range []func() error{s.moveOutbox, s.load, s.loadTexts, s.replayJournal, s.dropTexts, s.loadUnits, s.loadHeard, s.repair, s.dropBadNewest, s.recordSchema} {
		if err := step(); err != nil {
			if isNoSpace(err) {
				err = fmt.Errorf("%w: %w", ErrNoSpace, err)
			}
			return nil, errors.Join(fmt.Errorf("open store %s: %w", opts.Dir, err), db.Close())
		}
	}
	return s, nil
}

// recordSchema records the keyspace version this code writes, so that an
// older cairn, which would not read it right, refuses the directory. Every
// earlier keyspace is a subset of this one but for where the outbox is,
// which moveOutbox has moved by now.
func (s *Store) recordSchema() error {
	if s.schema == encoding.SchemaVersion {
		return nil
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(encoding.AppendMetaKey(nil, encoding.MetaSchema), encoding.AppendUint64(nil, encoding.SchemaVersion))
	})
	if err == nil && !s.noSync {
		err = s.db.Sync()
	}
	if err != nil {
		return fmt.Errorf("record keyspace version: %w", err)
	}
	s.schema = encoding.SchemaVersion
	return nil
}

// openAttempts bounds the opens of one start-up. After a power cut every
// memtable file and value-log file that was never synced is empty, and each
// costs one failed open; an open that fails the same way twice is final.
const openAttempts = 16

// openBadger opens the database, trying again where Badger refuses a file
// that was never synced: the failed open replaces it, and the next one
// succeeds.
func openBadger(opts badger.Options, log *slog.Logger) (*badger.DB, error) {
	var errs []error
	for attempt := 1; ; attempt++ {
		db, err := badger.Open(opts)
		if err == nil {
			if attempt > 1 {
				log.Warn("store opened after repairing files that were never synced (a power cut?)", "dir", opts.Dir, "attempts", attempt)
			}
			return db, nil
		}
		repeated := len(errs) > 0 && errs[len(errs)-1].Error() == err.Error()
		errs = append(errs, err)
		if attempt == openAttempts || !isUnsyncedFile(err) || repeated {
			return nil, errors.Join(errs...)
		}
		log.Warn("store did not open, trying again (expected after a power cut)", "dir", opts.Dir, "err", err)
	}
}

// isUnsyncedFile reports whether err is Badger refusing an empty memtable
// or value-log file. Badger wraps the error in ways errors.Is does not
// always see through, so its text is checked too.
func isUnsyncedFile(err error) bool {
	return errors.Is(err, z.NewFile) || strings.Contains(err.Error(), z.NewFile.Error())
}

// load checks the schema version, reads the counters and builds the series
// index: the open points are counted one by one (there are at most a
// bucket's worth per series-day, give or take late readings), and the
// sealed buckets are skipped through from series to series.
func (s *Store) load() error {
	return s.db.View(func(txn *badger.Txn) error {
		v, err := getUint64(txn, encoding.MetaSchema)
		if err != nil {
			return err
		}
		if v > encoding.SchemaVersion {
			return fmt.Errorf("data directory has keyspace version %d, this cairn reads version %d and older", v, encoding.SchemaVersion)
		}
		s.schema = v
		if s.readings, err = getUint64(txn, encoding.MetaReadings); err != nil {
			return err
		}
		if s.uncompacted, err = getUint64(txn, encoding.MetaUncompacted); err != nil {
			return err
		}
		if err := s.loadOutbox(txn); err != nil {
			return err
		}
		now := time.Now()
		pit := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindPoint)}})
		defer pit.Close()
		var run []Sample
		for pit.Rewind(); pit.Valid(); pit.Next() {
			item := pit.Item()
			r, err := encoding.ParsePointKey(item.Key())
			if err != nil {
				return err
			}
			err = item.Value(func(v []byte) (err error) {
				run, err = encoding.DecodeRun(run[:0], Sample{TS: r.TS, Value: r.Value}, v)
				return err
			})
			if err != nil {
				return fmt.Errorf("run %q: %w", item.Key(), err)
			}
			d := encoding.DayOf(r.TS)
			if encoding.DayOf(run[len(run)-1].TS) != d {
				return fmt.Errorf("run %q: spans two days", item.Key())
			}
			st := s.loadSeries(r.Device, r.Metric, now)
			st.last = max(st.last, run[len(run)-1].TS)
			st.addRun(d, run)
		}
		// Walk the buckets' series from the last backwards: the first key
		// seen of each series is its newest bucket.
		bit := txn.NewIterator(badger.IteratorOptions{Reverse: true})
		defer bit.Close()
		seek := []byte{byte(encoding.KindBucket) + 1}
		for bit.Seek(seek); bit.ValidForPrefix([]byte{byte(encoding.KindBucket)}); bit.Seek(seek) {
			item := bit.Item()
			device, metric, _, err := encoding.ParseBucketKey(item.Key())
			if err != nil {
				return err
			}
			var h encoding.BucketHeader
			if err := item.Value(func(v []byte) (err error) { h, err = encoding.ParseBucketHeader(v); return err }); err != nil {
				return fmt.Errorf("bucket %q: %w", item.Key(), err)
			}
			st := s.loadSeries(device, metric, now)
			st.last = max(st.last, h.Last)
			st.sealedLast = h.Last
			// No key equals a series prefix, so the next reverse seek lands
			// on the newest bucket of the series before this one.
			seek = encoding.AppendBucketPrefix(seek[:0], device, metric)
		}
		for _, st := range s.series {
			st.next = st.last
			// Records exist up to the newest rolled-up one.
			for i, l := range []aggregate.Level{aggregate.Hour, aggregate.Day} {
				if start, ok := lastRecord(txn, l, st.device, st.metric); ok {
					st.rolled[i] = start + int64(l.Duration())
				}
			}
			// Days are rolled up from hours: never ahead of them.
			st.rolled[rolledDays] = min(st.rolled[rolledDays], aggregate.Day.Truncate(st.rolled[rolledHours]))
		}
		return nil
	})
}

// repair deletes open points that a sealed bucket or an earlier run holds
// too. Sealing transactions are not synced on their own: after a power cut
// a seal can be lost while a later one that merged its buckets survives,
// and the lost seal's points are then back beside the bucket that holds
// them, and beside the rest of a run that the later seal wrote again. Only
// points not newer than a series' newest bucket are looked up in buckets.
func (s *Store) repair() error {
	var edits []openEdit
	type sample struct {
		ts   int64
		bits uint64
	} // -0 is not 0 here
	seen := make(map[sample]bool)
	err := s.db.View(func(txn *badger.Txn) error {
		for _, st := range s.series {
			for day := range st.days() {
				var lookup error
				clear(seen)
				e, err := st.planDrop(day, func(p Sample) bool {
					if lookup != nil {
						return false
					}
					id := sample{p.TS, math.Float64bits(p.Value)}
					if seen[id] {
						return true
					}
					seen[id] = true
					if p.TS > st.sealedLast {
						return false
					}
					in, err := s.inBucket(txn, Reading{Device: st.device, Metric: st.metric, TS: p.TS, Value: p.Value})
					lookup = err
					return in
				})
				if err = errors.Join(lookup, err); err != nil {
					return err
				}
				if e.removed > 0 {
					edits = append(edits, e)
				}
			}
		}
		return nil
	})
	if err != nil || len(edits) == 0 {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	doubled := 0
	for _, e := range edits {
		for _, k := range e.dels(nil) {
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
		for _, r := range e.sets(nil) {
			if err := wb.Set(r.key, r.value); err != nil {
				return err
			}
		}
		doubled += e.removed
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	for _, e := range edits {
		e.apply()
	}
	s.log.Warn("deleted open readings that a sealed bucket holds too (a seal lost in a power cut)", "readings", doubled)
	return nil
}

// lastRecord returns the start of the newest record of a level of a series.
func lastRecord(txn *badger.Txn, level aggregate.Level, device, metric string) (int64, bool) {
	prefix := encoding.AppendStatsPrefix(nil, level, device, metric)
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: prefix})
	defer it.Close()
	it.Seek(encoding.AppendTS(prefix[:len(prefix):len(prefix)], math.MaxInt64))
	if !it.Valid() || len(it.Item().Key()) != len(prefix)+8 {
		return 0, false
	}
	return encoding.DecodeTS(it.Item().Key()[len(prefix):]), true
}

func getUint64(txn *badger.Txn, name string) (uint64, error) {
	v, _, err := lookupUint64(txn, name)
	return v, err
}

// lookupUint64 reads the 8-byte meta value name, and whether there is one.
func lookupUint64(txn *badger.Txn, name string) (uint64, bool, error) {
	item, err := txn.Get(encoding.AppendMetaKey(nil, name))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("meta %s: %d bytes, want 8", name, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, true, err
}

// seriesID names a series in the in-memory index.
func seriesID(device, metric string) string { return device + "\x00" + metric }

// Close closes the database. The Writer must have stopped first.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.dir, err)
	}
	return nil
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// SeriesCount returns the number of series with at least one reading.
func (s *Store) SeriesCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.series)
}

// ReadingCount returns the number of distinct readings stored.
func (s *Store) ReadingCount() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.readings
}

// Series describes one series in the index.
type Series struct {
	Device string
	Metric string
	Last   int64  // newest timestamp stored, ns since the epoch
	Unit   string // "" when not known
}

// SeriesList returns every series, sorted by device then metric.
func (s *Store) SeriesList() []Series {
	s.mu.RLock()
	out := make([]Series, 0, len(s.series))
	for id, st := range s.series {
		dev, metric, _ := cutSeriesID(id)
		out = append(out, Series{Device: dev, Metric: metric, Last: st.last, Unit: st.unitName()})
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Device != out[j].Device {
			return out[i].Device < out[j].Device
		}
		return out[i].Metric < out[j].Metric
	})
	return out
}

func cutSeriesID(id string) (device, metric string, ok bool) {
	for i := 0; i < len(id); i++ {
		if id[i] == 0 {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}

// badgerLogger passes Badger's warnings and errors to the store's logger,
// which carries the component, adding library=badger; its info and debug
// chatter is dropped.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any) {
	l.log.Error(trimNL(fmt.Sprintf(f, a...)), "library", "badger")
}
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn(trimNL(fmt.Sprintf(f, a...)), "library", "badger")
}
func (l badgerLogger) Infof(string, ...any)  {}
func (l badgerLogger) Debugf(string, ...any) {}

func trimNL(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}

// Every table of the store is an open file and a memory map, and Linux
// allows a process 65,530 maps by default (vm.max_map_count; the
// systemd unit allows 65,536 open files): a store must not need more
// than maxTables tables, which leaves room for those a compaction writes
// before it deletes the ones it replaces, and for the level-0 tables and
// memtables. Tables are at least minTableSize: at 512 KiB, a default
// disk cap of 32 GiB would take 64 Ki tables.
const (
	maxTables    = 32 << 10
	minTableSize = 1 << 20
)

// Table builders a compaction may have writing tables at once beside the
// one each subcompaction fills, and builders' buffers kept for reuse
// (none: each block is allocated on its own, see Open).
const (
	compactionBuilders = 1
	tableBuilderPool   = 0
)

// tableSize returns the size of Badger's tables (every level's, see
// Open) for a memtable of memTable bytes in a store of at most maxBytes:
// half the memtable, at least minTableSize, and large enough, in whole
// MiB, that maxBytes takes at most maxTables.
//
// Half, because a table builder once started with a buffer of twice its
// table size, which a flushed memtable (one level-0 table, a little
// smaller than the memtable) fit while it stayed under twice the table
// size; at the 2 MiB memtable it often did not, and the builder took
// 4 MiB more. Builders then allocated each block on their own
// (tableBuilderPool 0), and held about their table whatever its size;
// since patch 0016 of cairn's copy of Badger they write each block to
// the table's file as they finish it and hold one, so a table's size no
// longer sets what a builder holds. Half stays: at five eighths, when
// every table a compaction wrote was held in memory until it was on
// disk, the RSS over the second half of a 10 M reading backlog was about
// a sixth higher (one run, with pooled buffers), and a larger table is
// not measured since.
func tableSize(memTable, maxBytes int64) int64 {
	size := max(memTable/2, minTableSize)
	if need := (maxBytes/maxTables + 1<<20 - 1) &^ (1<<20 - 1); need > size {
		size = need
	}
	return size
}

// compact has Badger rewrite its tables so that the space of deleted keys
// comes back: deletes only write tombstones, and a table is rewritten
// without them when compaction takes it to the lowest level that holds the
// keys. Flatten compacts every level down into one; writes go on
// meanwhile (into level 0, which stalls them at 8 tables), but Flatten
// ends only once a pass finds a single level, so a flood of writes keeps
// it going: the disk cap stops taking batches near the cap (see
// Retention). One worker: two pick the same level, and one of them fails
// ("Unable to fill tables"). The value log
// holds nothing (values stay in the tables), so its garbage collection
// rarely has anything to do.
func (s *Store) compact() error {
	if err := s.db.Flatten(1); err != nil {
		return fmt.Errorf("compact %s: %w", s.dir, err)
	}
	for s.db.RunValueLogGC(0.5) == nil {
	}
	return nil
}

// Uncompacted returns how many readings were deleted since the store was
// last compacted (Retention compacts once they are a tenth of the store).
func (s *Store) Uncompacted() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.uncompacted
}

// metaFlush is the marker key flushMemtables writes and drops.
const metaFlush = "flush"

// flushMemtables has Badger write its memtables out as tables, so that
// compaction sees the tombstones they hold: Badger has no call for that
// but DropPrefix, which flushes first, so a marker key is written and
// dropped. DropPrefix makes every other write fail while it runs
// (ErrBlockedWrites): call it on the Writer's goroutine; the store's other
// writes (the outbox's) retry (see update).
func (s *Store) flushMemtables() error {
	key := encoding.AppendMetaKey(nil, metaFlush)
	// The compaction that follows takes in every delete made so far.
	if err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(encoding.AppendMetaKey(nil, encoding.MetaUncompacted), encoding.AppendUint64(nil, 0)); err != nil {
			return err
		}
		return txn.Set(key, nil)
	}); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	s.mu.Lock()
	s.uncompacted = 0
	s.mu.Unlock()
	if err := s.db.DropPrefix(key); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// blockedRetry bounds how long update retries a write that a DropPrefix
// blocks; one runs for well under a second per million keys.
const blockedRetry = time.Minute

// update is db.Update, tried again while a DropPrefix blocks writes.
func (s *Store) update(fn func(txn *badger.Txn) error) error {
	deadline := time.Now().Add(blockedRetry)
	for {
		err := s.db.Update(fn)
		if !errors.Is(err, badger.ErrBlockedWrites) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metaMaxDisk remembers the default disk cap computed at first start.
const metaMaxDisk = "max_disk_bytes"

// MaxDefaultDiskBytes is the largest default disk cap
// (DefaultMaxDiskBytes).
const MaxDefaultDiskBytes = 32 << 30

// MinDiskBytes is the smallest disk cap that makes sense: Badger's files
// take several memtables' worth before they hold any reading.
const MinDiskBytes = 16 << 20

// defaultDiskShare is the share of the space free at first start that the
// default disk cap takes, at most MaxDefaultDiskBytes.
const defaultDiskShare = 0.7

// DefaultMaxDiskBytes returns the disk cap that retention.max_disk_bytes
// "auto" means: 70% of the space that was free on the data directory's
// file system (plus what the store took already) when it was first asked,
// at most 32 GiB. The first answer is kept in the store, so that the cap
// does not shrink as the store fills the disk.
func (s *Store) DefaultMaxDiskBytes() (int64, error) {
	var v uint64
	if err := s.db.View(func(txn *badger.Txn) (err error) { v, err = getUint64(txn, metaMaxDisk); return err }); err != nil {
		return 0, err
	}
	if v > 0 {
		return int64(v), nil
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &fs); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", s.dir, err)
	}
	st, err := s.measureDisk()
	if err != nil {
		return 0, err
	}
	free := float64(fs.Bavail) * float64(fs.Bsize)
	limit := min(int64((free+float64(st.DiskBytes))*defaultDiskShare), MaxDefaultDiskBytes)
	if limit < MinDiskBytes {
		return 0, fmt.Errorf("%s has %.0f bytes free: too little for a default cap; set one", s.dir, free)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(encoding.AppendMetaKey(nil, metaMaxDisk), encoding.AppendUint64(nil, uint64(limit)))
	}); err != nil {
		return 0, err
	}
	if err := s.db.Sync(); err != nil {
		return 0, err
	}
	return limit, nil
}

// newestReading returns the timestamp of the newest reading stored
// (math.MinInt64: none).
func (s *Store) newestReading() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	newest := int64(math.MinInt64)
	for _, st := range s.series {
		newest = max(newest, st.last)
	}
	return newest
}

// ReadingSpan returns the timestamps of the oldest and the newest reading
// stored; ok is false when there is none. It costs two seeks per series,
// and a look at the journal the Writer holds (no checkpoint). If that
// fails (the Writer is stuck), the readings still in the journal are left
// out: the status that asks must still answer. OldestReading is the cheap
// way to the oldest.
func (s *Store) ReadingSpan() (oldest, newest int64, ok bool, err error) {
	inJournal, _ := s.journalOldest()
	newest = s.newestReading()
	oldest, err = s.seekOldest()
	oldest = min(oldest, inJournal)
	if err != nil || oldest == math.MaxInt64 {
		return 0, 0, false, err
	}
	return oldest, newest, true, nil
}

// OldestReading returns the timestamp of the oldest reading stored; ok is
// false when there is none. It seeks as ReadingSpan does only the first
// time and after a prune removed readings: in between, each commit lowers
// what it found to the oldest reading committed, if older. The seeks
// touch a block of the store's tables for each series and level, tens of
// megabytes of a large store mapped into memory at once, and the status
// asks for the oldest reading each time it is polled. The readings in
// the journal, which the seeks do not see, it asks the Writer for (no
// checkpoint); when that fails, they were not seen, and it seeks again a
// second later at the earliest (oldestRecheck), not at every call.
//
// It waits for a step of the Writer: never call it on the Writer's
// goroutine, or holding mu.
func (s *Store) OldestReading() (oldest int64, ok bool, err error) {
	s.mu.RLock()
	oldest, valid := s.oldest, s.oldestCurrent()
	s.mu.RUnlock()
	if valid {
		return oldest, oldest != math.MaxInt64, nil
	}
	s.oldestMu.Lock()
	defer s.oldestMu.Unlock()
	s.mu.Lock()
	if s.oldestCurrent() { // sought meanwhile
		oldest = s.oldest
		s.mu.Unlock()
		return oldest, oldest != math.MaxInt64, nil
	}
	gen := s.oldestGen
	s.oldest = math.MaxInt64 // commits from here on lower it
	s.mu.Unlock()
	inJournal, journalErr := s.journalOldest()
	s.sought++
	found, err := s.seekOldest()
	if err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	s.oldest = min(s.oldest, found, inJournal)
	s.oldestValid = s.oldestGen == gen
	s.oldestUntil = time.Time{}
	if journalErr != nil {
		s.oldestUntil = time.Now().Add(oldestRecheck)
	}
	oldest = s.oldest
	s.mu.Unlock()
	return oldest, oldest != math.MaxInt64, nil
}

// oldestRecheck is how long OldestReading keeps what it found while the
// journal could not be checkpointed. Sought at every call, a status polled
// 20 times a second took 17% of cairn's CPU (docs/storage.md).
const oldestRecheck = time.Second

// oldestCurrent reports whether oldest may be returned as it is. The
// caller holds mu.
func (s *Store) oldestCurrent() bool {
	return s.oldestValid && (s.oldestUntil.IsZero() || time.Now().Before(s.oldestUntil))
}

// seekOldest returns the timestamp of the oldest reading of the tree
// (math.MaxInt64: none), seeking the first point and the first bucket of
// every series.
func (s *Store) seekOldest() (int64, error) {
	type series struct{ device, metric string }
	s.mu.RLock()
	list := make([]series, 0, len(s.series))
	for _, st := range s.series {
		list = append(list, series{st.device, st.metric})
	}
	s.mu.RUnlock()
	oldest := int64(math.MaxInt64)
	first := func(txn *badger.Txn, prefix []byte) []byte {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		if it.Rewind(); !it.Valid() {
			return nil
		}
		return it.Item().KeyCopy(nil)
	}
	err := s.db.View(func(txn *badger.Txn) error {
		for _, sr := range list {
			prefix := encoding.AppendSeriesPrefix(nil, sr.device, sr.metric)
			if k := first(txn, prefix); len(k) == len(prefix)+encoding.PointKeyFixed {
				oldest = min(oldest, encoding.DecodeTS(k[len(prefix):]))
			}
			if k := first(txn, encoding.AppendBucketPrefix(nil, sr.device, sr.metric)); k != nil {
				b, err := encoding.ParseBucketTail(k)
				if err != nil {
					return err
				}
				oldest = min(oldest, b.TS)
			}
		}
		return nil
	})
	return oldest, err
}
