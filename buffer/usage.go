package buffer

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// What the data directory takes is measured by a walk of its files, a few
// system calls per file. The store keeps the last measurement: the job
// that needs it fresh, the disk cap (Retention, every DiskCheck), takes
// it, and the status and /metrics read what it found (Stats), walking
// the directory themselves only when it is older than diskMaxAge (no
// Retention runs, or its checks are far apart): at most once per
// diskMaxAge, however often they are asked.

// diskMaxAge is how old a measurement Stats may give.
const diskMaxAge = 10 * time.Second

// Stats is a snapshot of the store's size.
type Stats struct {
	Readings  uint64 // distinct readings stored
	Series    int    // series with at least one reading
	DiskBytes int64  // bytes allocated to cairn's files in the data directory, the reserve file left out
	// ReserveFileBytes is what the reserve file holds (Headroom).
	ReserveFileBytes int64
	// ForeignBytes is what the files in the data directory that are not
	// cairn's hold; ForeignFiles names a few of them. The disk cap does
	// not count them, nor delete them.
	ForeignBytes int64
	ForeignFiles []string
	// MeasuredAt is when the data directory was measured (DiskBytes,
	// ReserveFileBytes, ForeignBytes and ForeignFiles): at most
	// diskMaxAge ago, about DiskCheck ago while a Retention runs. Readings
	// and Series are as of the call.
	MeasuredAt time.Time
}

// diskUsage is a measurement of the data directory.
type diskUsage struct {
	own, reserve, foreign int64
	foreignFiles          []string // a few of them; never changed once measured
	at                    time.Time
}

// Stats returns the store's counters and its size on disk as last
// measured (see MeasuredAt). It walks the data directory only when the
// last measurement is older than diskMaxAge.
func (s *Store) Stats() (Stats, error) {
	return s.stats(diskMaxAge)
}

// measureDisk is Stats with the data directory measured now.
func (s *Store) measureDisk() (Stats, error) {
	return s.stats(0)
}

// stats returns the store's counters and a measurement of the data
// directory no older than maxAge.
func (s *Store) stats(maxAge time.Duration) (Stats, error) {
	s.mu.RLock()
	st := Stats{Readings: s.readings, Series: len(s.series)}
	s.mu.RUnlock()
	s.diskMu.Lock()
	defer s.diskMu.Unlock()
	d := s.disk
	var err error
	if d.at.IsZero() || time.Since(d.at) >= maxAge {
		if d, err = s.walkDisk(); err == nil {
			s.disk = d
		}
	}
	st.DiskBytes, st.ReserveFileBytes, st.ForeignBytes = d.own, d.reserve, d.foreign
	st.ForeignFiles, st.MeasuredAt = slices.Clone(d.foreignFiles), d.at
	return st, err
}

// walkDisk measures the files in the data directory.
func (s *Store) walkDisk() (diskUsage, error) {
	d := diskUsage{at: time.Now()}
	err := filepath.WalkDir(s.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed by compaction meanwhile
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		rel, _ := filepath.Rel(s.dir, path)
		switch n := allocated(info); {
		case rel == ReserveFile:
			d.reserve += n
		case ownFile(rel):
			d.own += n
		default:
			d.foreign += n
			if len(d.foreignFiles) < maxForeignNames {
				d.foreignFiles = append(d.foreignFiles, rel)
			}
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("size of %s: %w", s.dir, err)
	}
	return d, nil
}

// allocated returns the bytes a file really occupies: Badger's files are
// sparse until written.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}
