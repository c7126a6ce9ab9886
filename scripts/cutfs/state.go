package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// pageSize is the granularity of the dirty-data cache. It is the usual
// kernel page size, so mmap writeback fills whole cache pages; any other
// kernel page size works too.
const pageSize = 4096

// maxIovecs bounds the number of buffers passed to one pwritev(2).
const maxIovecs = 1024

// fileKey identifies a backing file the way the loopback layer does
// (inode number mixed with the device, generation from the birth time).
type fileKey struct{ ino, gen uint64 }

func keyOf(in *fs.Inode) fileKey {
	a := in.StableAttr()
	return fileKey{a.Ino, a.Gen}
}

// page holds the dirty bytes buf[lo:hi] of one page-sized block of a
// file. Bytes outside [lo, hi) are not dirty and are read from the base.
type page struct {
	lo, hi int
	buf    [pageSize]byte
}

// fileState is the volatile view of one backing file: the backing file
// itself (the "disk") plus the dirty pages and the pending size that
// only an fsync writes back.
//
// The logical content of the file is: backing bytes below floor, zeros
// from floor up to size, with the dirty pages laid over both. floor is
// the lowest size the file was truncated to since the last sync, so
// truncating and re-extending a file reads back zeros rather than the
// stale backing bytes. floor <= size always holds.
type fileState struct {
	mu       sync.RWMutex
	f        *os.File // backing file; nil once closed
	writable bool     // f is open for writing
	baseSize int64    // size of the backing file
	floor    int64
	size     int64
	pages    map[int64]*page

	// refs and orphan are guarded by cutFS.mu.
	refs   int  // open handles
	orphan bool // the last name was removed; no longer in cutFS.files
}

func (s *fileState) cleanLocked() bool {
	return len(s.pages) == 0 && s.size == s.baseSize && s.floor == s.baseSize
}

func (s *fileState) dirtyBytesLocked() int64 {
	var n int64
	for _, p := range s.pages {
		n += int64(p.hi - p.lo)
	}
	return n
}

// resetLocked forgets all dirty data and takes the backing file as the
// truth again.
func (s *fileState) resetLocked() {
	s.pages = make(map[int64]*page)
	size := s.baseSize
	if s.f != nil {
		if fi, err := s.f.Stat(); err == nil {
			size = fi.Size()
		}
	}
	s.baseSize, s.floor, s.size = size, size, size
}

func (s *fileState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// readBaseLocked fills p with the base content at off: backing bytes
// below floor, zeros above.
func (s *fileState) readBaseLocked(p []byte, off int64) error {
	clear(p)
	if off >= s.floor || s.f == nil {
		return nil
	}
	n := min(int64(len(p)), s.floor-off)
	_, err := s.f.ReadAt(p[:n], off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// read copies the logical content at off into p and returns the number
// of bytes up to the logical end of file.
func (s *fileState) read(p []byte, off int64) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if off >= s.size {
		return 0, nil
	}
	n := min(int64(len(p)), s.size-off)
	p = p[:n]
	if err := s.readBaseLocked(p, off); err != nil {
		return 0, err
	}
	if len(s.pages) == 0 {
		return int(n), nil
	}
	end := off + n
	for idx := off / pageSize; idx*pageSize < end; idx++ {
		pg := s.pages[idx]
		if pg == nil {
			continue
		}
		start := idx * pageSize
		a := max(start+int64(pg.lo), off)
		b := min(start+int64(pg.hi), end)
		if a < b {
			copy(p[a-off:b-off], pg.buf[a-start:b-start])
		}
	}
	return int(n), nil
}

// writeLocked records p at off as dirty data and extends the size.
func (s *fileState) writeLocked(p []byte, off int64) error {
	for len(p) > 0 {
		idx := off / pageSize
		start := idx * pageSize
		po := int(off - start)
		n := min(len(p), pageSize-po)
		pg := s.pages[idx]
		if pg == nil {
			pg = &page{lo: po, hi: po + n}
			s.pages[idx] = pg
		} else {
			// Keep [lo, hi) contiguous: fill a gap between the old
			// dirty range and the new one from the base.
			if po > pg.hi {
				if err := s.readBaseLocked(pg.buf[pg.hi:po], start+int64(pg.hi)); err != nil {
					return err
				}
			}
			if po+n < pg.lo {
				if err := s.readBaseLocked(pg.buf[po+n:pg.lo], start+int64(po+n)); err != nil {
					return err
				}
			}
			pg.lo, pg.hi = min(pg.lo, po), max(pg.hi, po+n)
		}
		copy(pg.buf[po:po+n], p[:n])
		p = p[n:]
		off += int64(n)
	}
	s.size = max(s.size, off)
	return nil
}

// zeroLocked makes [off, end) read as zeros without changing the size.
func (s *fileState) zeroLocked(off, end int64) error {
	end = min(end, s.size)
	var zeros [pageSize]byte
	for off < end {
		idx := off / pageSize
		n := min(end-off, (idx+1)*pageSize-off)
		if s.pages[idx] != nil || off < s.floor {
			if err := s.writeLocked(zeros[:n], off); err != nil {
				return err
			}
		}
		off += n
	}
	return nil
}

// truncateLocked sets the pending size.
func (s *fileState) truncateLocked(size int64) {
	if size < s.size {
		for idx, pg := range s.pages {
			start := idx * pageSize
			if start >= size {
				delete(s.pages, idx)
				continue
			}
			if start+int64(pg.hi) > size {
				pg.hi = int(size - start)
				if pg.hi <= pg.lo {
					delete(s.pages, idx)
				}
			}
		}
		s.floor = min(s.floor, size)
	}
	s.size = size
}

// syncLocked writes the dirty data and the pending size to the backing
// file and fsyncs it.
func (s *fileState) syncLocked() error {
	if s.f == nil {
		return syscall.EBADF
	}
	w := s.f
	if !s.writable {
		// Reopen the same inode for writing; works for unlinked files too.
		var err error
		w, err = os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(s.f.Fd())), os.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer w.Close()
	}
	cur := s.baseSize
	if s.floor < cur {
		if err := w.Truncate(s.floor); err != nil {
			return err
		}
		cur = s.floor
	}
	idxs := make([]int64, 0, len(s.pages))
	for idx := range s.pages {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	var iov [][]byte
	var runOff int64
	flush := func() error {
		if len(iov) == 0 {
			return nil
		}
		end, err := pwritevFull(w, iov, runOff)
		iov = iov[:0]
		cur = max(cur, end)
		return err
	}
	for i, idx := range idxs {
		pg := s.pages[idx]
		joins := i > 0 && idxs[i-1] == idx-1 && s.pages[idx-1].hi == pageSize && pg.lo == 0 && len(iov) < maxIovecs
		if !joins {
			if err := flush(); err != nil {
				return err
			}
			runOff = idx*pageSize + int64(pg.lo)
		}
		iov = append(iov, pg.buf[pg.lo:pg.hi])
	}
	if err := flush(); err != nil {
		return err
	}
	if cur != s.size {
		if err := w.Truncate(s.size); err != nil {
			return err
		}
	}
	if err := w.Sync(); err != nil {
		return err
	}
	s.pages = make(map[int64]*page)
	s.baseSize, s.floor = s.size, s.size
	return nil
}

// pwritevFull writes bufs at off and returns the end offset.
func pwritevFull(f *os.File, bufs [][]byte, off int64) (int64, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	n, err := unix.Pwritev(int(f.Fd()), bufs, off)
	if err != nil {
		return off, err
	}
	if n < total {
		rest := slices.Concat(bufs...)[n:]
		if _, err := f.WriteAt(rest, off+int64(n)); err != nil {
			return off, err
		}
	}
	return off + int64(total), nil
}

// attr fills a from the backing file, with the pending size.
func (s *fileState) attr(a *fuse.Attr) syscall.Errno {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.f == nil {
		return syscall.EBADF
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(s.f.Fd()), &st); err != nil {
		return fs.ToErrno(err)
	}
	a.FromStat(&st)
	setSize(a, s.size)
	return 0
}

// setSize reports the pending size, with at least as many blocks as the
// size needs, so tools do not take a grown file for a sparse one.
func setSize(a *fuse.Attr, size int64) {
	a.Size = uint64(size)
	a.Blocks = max(a.Blocks, (a.Size+511)/512)
}

// nameChange is a directory entry change that no fsync of the affected
// directories has covered yet.
type nameChange struct {
	op, path, from string
	dirs           map[fileKey]bool // directories still waiting for an fsync
}

// cutReport summarises what a cut threw away.
type cutReport struct {
	droppedBytes int64
	droppedFiles int
	names        []*nameChange
}

func (r *cutReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cutfs: cut dropped_bytes=%d dropped_files=%d unsynced_names=%d\n",
		r.droppedBytes, r.droppedFiles, len(r.names))
	for _, c := range r.names {
		fmt.Fprintf(&b, "cutfs: unsynced-name op=%s path=%s", c.op, quotePath(c.path))
		if c.from != "" {
			fmt.Fprintf(&b, " from=%s", quotePath(c.from))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// quotePath leaves ordinary paths alone and Go-quotes the rest, so every
// report entry stays on one line.
func quotePath(p string) string {
	if p == "" || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f }) {
		return strconv.Quote(p)
	}
	return p
}

// cutFS holds the volatile state of the whole mount.
type cutFS struct {
	cut atomic.Bool

	// nsMu is held shared by namespace changes and exclusively by the
	// cut, so no name change straddles the cut.
	nsMu sync.RWMutex

	// mu guards files, names and fileState.refs/orphan. Lock order:
	// nsMu, mu, fileState.mu.
	mu    sync.Mutex
	files map[fileKey]*fileState
	names []*nameChange

	stallMu sync.Mutex    // guards resume
	resume  chan struct{} // while fsyncs stall, closed to let them go on
}

// toggleStall makes every fsync from now on wait until the next call
// (reporting true), or lets the waiting ones go on (reporting false).
func (c *cutFS) toggleStall() bool {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	if c.resume == nil {
		c.resume = make(chan struct{})
		return true
	}
	close(c.resume)
	c.resume = nil
	return false
}

// waitStall waits while fsyncs stall.
func (c *cutFS) waitStall() {
	c.stallMu.Lock()
	ch := c.resume
	c.stallMu.Unlock()
	if ch != nil {
		<-ch
	}
}

func newCutFS() *cutFS {
	return &cutFS{files: make(map[fileKey]*fileState)}
}

// openBacking opens path read-write, or with the access mode of flags
// if that is refused.
func openBacking(path string, flags uint32) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err == nil {
		return f, true, nil
	}
	acc := int(flags) & syscall.O_ACCMODE
	f, err2 := os.OpenFile(path, acc|syscall.O_CLOEXEC, 0)
	if err2 != nil {
		return nil, false, err2
	}
	return f, acc != os.O_RDONLY, nil
}

// acquire returns the state of the file key, loading it from path if
// needed, and takes a reference on it.
func (c *cutFS) acquire(key fileKey, path string, flags uint32) (*fileState, syscall.Errno) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.files[key]; s != nil {
		s.refs++
		return s, 0
	}
	f, writable, err := openBacking(path, flags)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fs.ToErrno(err)
	}
	sz := fi.Size()
	s := &fileState{f: f, writable: writable, baseSize: sz, floor: sz, size: sz,
		pages: make(map[int64]*page), refs: 1}
	c.files[key] = s
	return s, 0
}

// release drops a reference. A clean state without references is
// forgotten; a dirty one stays until an fsync or the cut.
func (c *cutFS) release(key fileKey, s *fileState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	if !s.orphan {
		s.mu.RLock()
		clean := s.cleanLocked()
		s.mu.RUnlock()
		if !clean {
			return
		}
		if c.files[key] == s {
			delete(c.files, key)
		}
	}
	s.close()
}

// orphan detaches the state of a file whose last name is gone, so a new
// file that reuses the inode number starts clean.
func (c *cutFS) orphan(key fileKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.files[key]
	if s == nil {
		return
	}
	delete(c.files, key)
	s.orphan = true
	if s.refs == 0 {
		s.close()
	}
}

// pendingSize returns the logical size of key if cutfs tracks it.
func (c *cutFS) pendingSize(key fileKey) (int64, bool) {
	c.mu.Lock()
	s := c.files[key]
	c.mu.Unlock()
	if s == nil {
		return 0, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.size, true
}

func (c *cutFS) patchSize(key fileKey, a *fuse.Attr) {
	if sz, ok := c.pendingSize(key); ok {
		setSize(a, sz)
	}
}

func (c *cutFS) write(s *fileState, bufs [][]byte, off int64) (uint32, syscall.Errno) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.cut.Load() {
		return uint32(total), 0 // after the cut, writes vanish
	}
	for _, b := range bufs {
		if err := s.writeLocked(b, off); err != nil {
			return 0, fs.ToErrno(err)
		}
		off += int64(len(b))
	}
	return uint32(total), 0
}

func (c *cutFS) truncate(s *fileState, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.cut.Load() {
		s.truncateLocked(size)
	}
}

func (c *cutFS) allocate(s *fileState, off, length int64, mode uint32) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.cut.Load() {
		return 0
	}
	keep := mode&unix.FALLOC_FL_KEEP_SIZE != 0
	switch mode &^ unix.FALLOC_FL_KEEP_SIZE {
	case 0:
		// Plain preallocation: only the size can change.
	case unix.FALLOC_FL_PUNCH_HOLE, unix.FALLOC_FL_ZERO_RANGE:
		if err := s.zeroLocked(off, off+length); err != nil {
			return fs.ToErrno(err)
		}
	default:
		return syscall.EOPNOTSUPP
	}
	if !keep && off+length > s.size {
		s.size = off + length
	}
	return 0
}

func (c *cutFS) sync(s *fileState) syscall.Errno {
	c.waitStall()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.cut.Load() {
		return 0
	}
	return fs.ToErrno(s.syncLocked())
}

// beginNS starts a namespace change. It refuses changes after the cut.
func (c *cutFS) beginNS() (func(), syscall.Errno) {
	c.nsMu.RLock()
	if c.cut.Load() {
		c.nsMu.RUnlock()
		return nil, syscall.EROFS
	}
	return c.nsMu.RUnlock, 0
}

// record notes a name change in the directories dirs.
func (c *cutFS) record(op, path, from string, dirs ...*fs.Inode) {
	ch := &nameChange{op: op, path: path, from: from, dirs: make(map[fileKey]bool)}
	for _, d := range dirs {
		ch.dirs[keyOf(d)] = true
	}
	c.mu.Lock()
	c.names = append(c.names, ch)
	c.mu.Unlock()
}

// dirSynced drops the directory dir from all pending name changes.
func (c *cutFS) dirSynced(dir fileKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.names[:0]
	for _, ch := range c.names {
		delete(ch.dirs, dir)
		if len(ch.dirs) > 0 {
			kept = append(kept, ch)
		}
	}
	clear(c.names[len(kept):])
	c.names = kept
}

// syncAll writes back the dirty data of every file, as a clean shutdown
// does, and returns the number of files and dirty bytes written.
func (c *cutFS) syncAll() (files int, bytes int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut.Load() {
		return 0, 0, nil
	}
	var errs []error
	for _, s := range c.files {
		s.mu.Lock()
		if !s.cleanLocked() {
			n := s.dirtyBytesLocked()
			if e := s.syncLocked(); e != nil {
				errs = append(errs, e)
			} else {
				files++
				bytes += n
			}
		}
		s.mu.Unlock()
	}
	return files, bytes, errors.Join(errs...)
}

// doCut drops all unsynced data and size changes, makes the file system
// ignore further writes and returns what was dropped.
func (c *cutFS) doCut() *cutReport {
	c.nsMu.Lock()
	defer c.nsMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &cutReport{}
	if c.cut.Swap(true) {
		return r
	}
	keys := make([]fileKey, 0, len(c.files))
	for k := range c.files {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ino < keys[j].ino })
	for _, k := range keys {
		s := c.files[k]
		s.mu.Lock()
		if !s.cleanLocked() {
			r.droppedFiles++
			r.droppedBytes += s.dirtyBytesLocked()
		}
		s.resetLocked()
		s.mu.Unlock()
		if s.refs == 0 {
			delete(c.files, k)
			s.close()
		}
	}
	r.names = c.names
	c.names = nil
	return r
}
