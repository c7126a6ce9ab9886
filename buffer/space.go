package buffer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A full file system is an error on every path of the store: Badger's
// memory-mapped files have their blocks allocated when they are created
// (see third_party/badger/CAIRN.md), so a write that finds no room fails with
// ENOSPC instead of faulting. Headroom keeps cairn from getting there:
// it pauses ingest while the file system has less than a reserve free,
// which leaves Badger room to flush its memtables and finish its
// compactions. Something else may fill the file system all the same (a
// file that is not cairn's, say): then Badger's flushes and commits fail,
// and are tried again, until there is room. A reserve file in the data
// directory, allocated while there is room, is given up by Open when the
// store could not open otherwise: a gateway restarted on a full disk
// still opens, serves its data and waits for room.

// ReserveFile is the name of the reserve file in the data directory.
const ReserveFile = "reserve"

// ReserveFileBytes is the size of the reserve file for a memtable of
// memTable bytes: room to open the store (a new memtable's write-ahead
// log of twice the memtable, allocated at once) and flush one memtable.
func ReserveFileBytes(memTable int64) int64 {
	if memTable <= 0 {
		memTable = defaultMemTableSize
	}
	return 4 * memTable
}

// DefaultDiskReserve is the free space below which ingest pauses, for a
// memtable of memTable bytes: a memtable flush (a new write-ahead log of
// twice the memtable and a level-0 table) and a compaction of level 0
// into the base level (about three memtables, written before the tables
// they replace are removed), twice over; at least 32 MiB.
func DefaultDiskReserve(memTable int64) int64 {
	if memTable <= 0 {
		memTable = defaultMemTableSize
	}
	return max(8*memTable, 32<<20)
}

// ErrNoSpace is returned (wrapped) by Open when the store cannot open for
// want of free space on its file system.
var ErrNoSpace = errors.New("no space left on the data directory's file system")

// FreeBytes returns the bytes free for an unprivileged user on the file
// system that holds dir.
func FreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// isNoSpace reports whether err says the file system is full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrNoSpace) ||
		err != nil && strings.Contains(err.Error(), syscall.ENOSPC.Error())
}

// releaseReserveToOpen removes the reserve file when the file system has
// less than need bytes free, so that the store can open on a full disk.
func releaseReserveToOpen(dir string, need int64, log *slog.Logger) error {
	free, err := FreeBytes(dir)
	if err != nil || free >= need {
		return err
	}
	path := filepath.Join(dir, ReserveFile)
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the reserve file: %w", err)
	}
	log.Warn("the file system is full: gave up the reserve file so that the store can open; ingest waits for free space",
		"dir", dir, "free_bytes", free, "reserve_file_bytes", allocated(info))
	return nil
}

// ownFile reports whether rel, a regular file's path relative to the
// data directory, is one of cairn's: Badger's files, the uplink's parked
// batches, and the reserve file (which Stats counts apart).
func ownFile(rel string) bool {
	if dir, _, ok := strings.Cut(rel, string(filepath.Separator)); ok {
		return dir == "parked"
	}
	switch rel {
	case "MANIFEST", "MANIFEST-REWRITE", "KEYREGISTRY", "REWRITE-KEYREGISTRY", "DISCARD", "LOCK", ReserveFile:
		return true
	}
	for _, ext := range []string{".sst", ".vlog", ".mem"} {
		if name, ok := strings.CutSuffix(rel, ext); ok && name != "" && strings.Trim(name, "0123456789") == "" {
			return true
		}
	}
	return false
}

// maxForeignNames bounds the names of foreign files Stats returns.
const maxForeignNames = 5

// HeadroomOptions configure a Headroom. Zero values are defaults.
type HeadroomOptions struct {
	// Reserve is the free space below which ingest pauses
	// (DefaultDiskReserve of the store's memtable by default).
	Reserve int64
	// Check is how often the free space is measured (default 1s).
	Check time.Duration
	// Logger receives the changes of state. Nil means discard.
	Logger *slog.Logger
}

// Headroom keeps room on the file system of a Store's data directory. While
// less than the reserve is free, the Writer takes no new batches: their
// messages wait unacknowledged (at the publisher, or redelivered by an
// external broker), and nothing is lost. Once the reserve and a margin
// are free again, it takes them again. It makes the reserve file
// (allocated) once there is room for it beside the reserve; only Open
// gives it up, when the store could not open without it, so that a
// gateway restarted on a full disk still opens. Don't forget to Run it.
type Headroom struct {
	store  *Store
	writer *Writer
	opts   HeadroomOptions
	log    *slog.Logger

	fileBytes int64 // the reserve file's size

	mu        sync.Mutex // guards the fields below
	free      int64      // bytes free at the last check
	fileHeld  int64      // bytes the reserve file holds (0: none)
	pausedFor string     // why the Writer was told to pause; "" when it was not
	checked   bool
	lastErr   string // the last failure to measure or to make the reserve file, logged once
}

// NewHeadroom creates the Headroom of w, the Writer of s.
func NewHeadroom(s *Store, w *Writer, opts HeadroomOptions) *Headroom {
	if opts.Reserve <= 0 {
		opts.Reserve = DefaultDiskReserve(s.memTable)
	}
	if opts.Check <= 0 {
		opts.Check = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Headroom{store: s, writer: w, opts: opts, log: log,
		fileBytes: ReserveFileBytes(s.memTable)}
}

// Reserve returns the free space below which ingest pauses, the default
// worked out: what RetentionOptions.Reserve must be for the disk cap to
// leave it free.
func (h *Headroom) Reserve() int64 { return h.opts.Reserve }

// openNeed is the free space the store needs to open, or to start a new
// memtable: its write-ahead log (twice the memtable) and a little more.
func openNeed(memTable int64) int64 { return 2*memTable + 1<<20 }

// resumeMargin is how far above the reserve the free space must be for
// ingest to resume, so that it does not pause and resume at every check.
func (h *Headroom) resumeMargin() int64 { return resumeMargin(h.opts.Reserve) }

// resumeMargin is how far above reserve the free space must be for a
// Headroom to resume ingest: an eighth of it, at least 1 MiB.
func resumeMargin(reserve int64) int64 { return max(reserve/8, 1<<20) }

// Run checks the free space every Check until ctx ends or the Writer
// stops, and returns nil.
func (h *Headroom) Run(ctx context.Context) error {
	t := time.NewTicker(h.opts.Check)
	defer t.Stop()
	for {
		if err := h.CheckOnce(ctx); ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CheckOnce measures the free space, makes the reserve file if it is
// missing and there is room, and pauses or resumes the Writer. It is the
// one-step form of Run.
func (h *Headroom) CheckOnce(ctx context.Context) error {
	path := filepath.Join(h.store.dir, ReserveFile)
	free, err := FreeBytes(h.store.dir)
	if err != nil {
		h.failed(err)
		return err
	}
	held := int64(0)
	if info, err := os.Stat(path); err == nil {
		held = info.Size() // allocated whole when it was made
	}
	h.mu.Lock()
	paused := h.pausedFor != ""
	h.mu.Unlock()
	switch {
	case free < h.opts.Reserve:
		paused = true
	case free >= h.opts.Reserve+h.resumeMargin():
		paused = false
	}
	if !paused && held == 0 && free >= h.opts.Reserve+h.resumeMargin()+h.fileBytes {
		if err := makeReserveFile(path, h.fileBytes); err != nil {
			h.failed(err)
		} else {
			held = h.fileBytes
			if free, err = FreeBytes(h.store.dir); err != nil {
				return err
			}
		}
	}
	reason := ""
	if paused {
		reason = fmt.Sprintf("the file system of the data directory has %s free, less than the reserve of %s",
			formatBytes(free), formatBytes(h.opts.Reserve))
	}
	h.mu.Lock()
	was := h.pausedFor
	h.free, h.fileHeld, h.checked = free, held, true
	h.mu.Unlock()
	if reason != was {
		if err := h.writer.setPause(ctx, PauseDiskFree, reason); err != nil {
			return err
		}
		h.mu.Lock()
		h.pausedFor = reason
		h.mu.Unlock()
	}
	switch {
	case reason != "" && was == "":
		h.log.Warn("ingest paused: the file system is nearly full; messages are not acknowledged until space is freed",
			"free_bytes", free, "reserve_bytes", h.opts.Reserve)
	case reason == "" && was != "":
		h.log.Warn("ingest resumed: the file system has room again", "free_bytes", free, "reserve_bytes", h.opts.Reserve)
	}
	return nil
}

// failed logs err once until a different one comes.
func (h *Headroom) failed(err error) {
	h.mu.Lock()
	same := h.lastErr == err.Error()
	h.lastErr = err.Error()
	h.mu.Unlock()
	if !same {
		h.log.Error("free space check", "err", err)
	}
}

// makeReserveFile creates the reserve file at path with size bytes
// allocated, or leaves none.
func makeReserveFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("make the reserve file: %w", err)
	}
	err = allocate(f, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("make the reserve file: %w", err), os.Remove(path))
	}
	return nil
}

// HeadroomStatus is what Headroom last measured.
type HeadroomStatus struct {
	FreeBytes        int64 // free on the data directory's file system
	ReserveBytes     int64 // ingest pauses below this much free
	ReserveFileBytes int64 // held by the reserve file (0: none)
}

// Status returns what the last check measured; before the first check it
// measures the free space itself.
func (h *Headroom) Status() HeadroomStatus {
	h.mu.Lock()
	st := HeadroomStatus{FreeBytes: h.free, ReserveBytes: h.opts.Reserve, ReserveFileBytes: h.fileHeld}
	checked := h.checked
	h.mu.Unlock()
	if !checked {
		st.FreeBytes, _ = FreeBytes(h.store.dir)
	}
	return st
}

// formatBytes says n in the largest binary unit that keeps it at least 1.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
