// Command cutfs is a test-only FUSE file system that simulates losing
// power, in the spirit of LazyFS. It is used by crash tests of the
// gateway's Badger store and ships in no release binary.
//
// Usage:
//
//	cutfs -backing DIR -mount DIR [-ready FILE] [-debug]
//
// cutfs mounts a loopback view of the backing directory at the mount
// point. Once the mount is live it prints "cutfs: mounted" on stdout and,
// with -ready, writes "ready\n" to FILE (atomically, via rename), so
// scripts can wait for either.
//
// # What is simulated
//
// Every write that reaches the file system - write(2), and the kernel
// writing back pages of shared writable mmaps - is kept in memory as
// dirty pages of its file, and so are size changes (ftruncate, O_TRUNC,
// writes past the end, fallocate). Reads merge the dirty pages over the
// backing file, and stat reports the pending size (so an mmap beyond the
// backing file's end does not fault). Only fsync or fdatasync of a file -
// and msync(MS_SYNC), which the kernel turns into writes plus FSYNC -
// writes that file's dirty data and size to the backing file and fsyncs
// it there. Closing a file makes nothing durable.
//
// Sending SIGUSR1 performs the "cut": all dirty data and pending size
// changes of all files are dropped, and from then on writes, size changes
// and fsyncs are accepted and ignored (the kernel keeps writing back a
// killed process's pages for a while), directory and xattr changes fail
// with EROFS, and reads are answered from the backing directory. After a
// cut cutfs prints
//
//	cutfs: cut dropped_bytes=N dropped_files=M unsynced_names=K
//
// followed by K lines, one per directory entry change (create, mkdir,
// mknod, symlink, link, rename, unlink, rmdir) that no fsync of the
// directory holding it followed:
//
//	cutfs: unsynced-name op=rename path=dir/new from=dir/old
//
// Paths are relative to the mount point; a path with blanks, quotes or
// control characters is printed Go-quoted. dropped_bytes and
// dropped_files count the unsynced data that had reached cutfs; pages a
// killed process left dirty in the kernel that arrive after the cut are
// discarded as they come, uncounted. A second SIGUSR1 reports zeros.
//
// SIGUSR2 stalls the disk: every fsync from then on waits, unanswered,
// until the next SIGUSR2, as on an SD card that has stopped answering.
// cutfs prints "cutfs: stalled" and "cutfs: resumed".
//
// SIGTERM or SIGINT unmount and exit 0, as does an external
// "fusermount3 -u". An unmount without a cut is a clean shutdown: the
// remaining dirty data is written back and fsynced, and cutfs prints
// "cutfs: unmounted synced_files=M synced_bytes=N". To simulate power
// loss, cut first; after a cut it prints "cutfs: unmounted".
//
// # What is not simulated
//
//   - Lost directory entries: creates, renames, unlinks and mkdirs are
//     applied to the backing directory at once and survive the cut; the
//     ones no directory fsync covered are only reported.
//   - Torn or partial writes: a sync writes the whole file, so there are
//     no torn pages or sectors and no partially synced files, and
//     everything written before a sync is durable after it, whatever
//     range an msync named.
//   - Reordered writes: unsynced data is all or nothing; none of it
//     reaches the backing file early.
//   - Metadata other than the size (mode, owner, times, xattrs) is
//     applied at once.
//   - sync(2) and syncfs(2) do not reach FUSE file systems, so they make
//     nothing durable here; only an fsync of the file does.
//   - The kernel's page cache is invalidated at the cut, but a process
//     that still writes afterwards sees its own data through the mount
//     until the unmount; inspect the backing directory after unmounting.
//
// File locks (flock, fcntl) are handled by the kernel, locally to the
// mount. O_TMPFILE is refused. Dirty data is held in memory without a
// limit until the file is fsynced or the cut.
//
// cutfs keeps the kernel page cache (no direct_io, keep_cache on open,
// explicit cache invalidation only) so shared writable mmaps work, and it
// does not enable the FUSE writeback cache, so every write and every
// written-back page reaches the daemon. It needs /dev/fuse and is meant
// to run as root; the mount is private to the mounting user (no
// allow_other).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

func main() {
	backing := flag.String("backing", "", "backing `directory` holding the durable state")
	mount := flag.String("mount", "", "mount point `directory`")
	ready := flag.String("ready", "", "write \"ready\" to this `file` once mounted")
	debug := flag.Bool("debug", false, "log every FUSE request to stderr")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(),
			"usage: cutfs -backing DIR -mount DIR [-ready FILE] [-debug]\n"+
				"SIGUSR1 cuts power, SIGUSR2 stalls or resumes fsyncs, SIGTERM/SIGINT unmount.\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *backing == "" || *mount == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*backing, *mount, *ready, *debug); err != nil {
		fmt.Fprintln(os.Stderr, "cutfs:", err)
		os.Exit(1)
	}
}

var stdoutMu sync.Mutex

func say(s string) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.WriteString(s)
}

func run(backing, mountDir, ready string, debug bool) error {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return err
	}
	mountDir, err = filepath.Abs(mountDir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(backing); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", backing)
	}

	c := newCutFS()
	root, err := newRoot(c, backing)
	if err != nil {
		return err
	}
	sec, zero := time.Second, time.Duration(0)
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName: "cutfs",
			Name:   "cutfs",
			// Only cutfs changes the backing files, and it keeps the
			// kernel's cached pages valid: never drop them because
			// the backing mtime moved on a sync.
			ExplicitDataCacheControl: true,
			// Passthrough would send I/O straight to the backing
			// files, around the cache.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH | fuse.CAP_WRITEBACK_CACHE,
			Debug:                debug,
		},
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &zero,
	}
	// Catch the signals before mounting, so an early one is not fatal.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	server, err := fs.Mount(mountDir, root, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountDir, err)
	}
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGUSR1 {
				r := c.doCut()
				invalidate(root.inode())
				say(r.String())
				continue
			}
			if sig == syscall.SIGUSR2 {
				if c.toggleStall() {
					say("cutfs: stalled\n")
				} else {
					say("cutfs: resumed\n")
				}
				continue
			}
			go unmount(server, mountDir)
		}
	}()

	if ready != "" {
		if err := writeReady(ready); err != nil {
			server.Unmount()
			return err
		}
	}
	say("cutfs: mounted\n")
	server.Wait()
	if c.cut.Load() {
		say("cutfs: unmounted\n")
		return nil
	}
	files, n, err := c.syncAll()
	say(fmt.Sprintf("cutfs: unmounted synced_files=%d synced_bytes=%d\n", files, n))
	return err
}

func writeReady(path string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("ready\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// unmount detaches the mount; if it stays busy, it detaches it lazily.
// server.Wait returns once the kernel lets go of the connection.
func unmount(server *fuse.Server, dir string) {
	err := server.Unmount()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "cutfs: unmount:", err, "- detaching lazily")
	if err := exec.Command("fusermount3", "-u", "-z", dir).Run(); err != nil {
		if err2 := syscall.Unmount(dir, syscall.MNT_DETACH); err2 != nil {
			fmt.Fprintln(os.Stderr, "cutfs: lazy unmount:", errors.Join(err, err2))
		}
	}
}

// invalidate drops the kernel's cached pages and attributes of every
// regular file the kernel knows, so that reads after a cut reach cutfs
// and see the backing state. Dirty pages the kernel still holds are
// written back first, and ignored.
func invalidate(in *fs.Inode) {
	for _, ch := range in.Children() {
		if ch.IsDir() {
			invalidate(ch)
		} else if isRegular(ch) {
			ch.NotifyContent(0, 0)
		}
	}
}

// node is a loopback node whose regular files go through the volatile
// cache of cutFS. Directory operations are applied to the backing
// directory at once and recorded until the directory is fsynced.
type node struct {
	fs.LoopbackNode
	c *cutFS
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
)

// newRoot returns the root node of a cutfs mount over dir.
func newRoot(c *cutFS, dir string) (*node, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return nil, err
	}
	root := &fs.LoopbackRoot{Path: dir, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, c: c}
	}
	n := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, c: c}
	root.RootNode = n
	return n, nil
}

func (n *node) inode() *fs.Inode { return n.EmbeddedInode() }

func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.inode().Path(nil))
}

// childPath is the mount-relative path of name in n, for reports.
func (n *node) childPath(name string) string {
	return path.Join(n.inode().Path(nil), name)
}

func isRegular(in *fs.Inode) bool {
	return in.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 && isRegular(ch) {
		n.c.patchSize(keyOf(ch), &out.Attr)
	}
	return ch, errno
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.st.attr(&out.Attr)
	}
	errno := n.LoopbackNode.Getattr(ctx, f, out)
	if errno == 0 && isRegular(n.inode()) {
		n.c.patchSize(keyOf(n.inode()), &out.Attr)
	}
	return errno
}

func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	h, ok := f.(*handle)
	if !ok {
		errno := n.LoopbackNode.Statx(ctx, f, flags, mask, out)
		if errno == 0 && isRegular(n.inode()) {
			if sz, ok := n.c.pendingSize(keyOf(n.inode())); ok {
				out.Size = uint64(sz)
				out.Blocks = max(out.Blocks, (out.Size+511)/512)
			}
		}
		return errno
	}
	h.st.mu.RLock()
	defer h.st.mu.RUnlock()
	if h.st.f == nil {
		return syscall.EBADF
	}
	var x unix.Statx_t
	if err := unix.Statx(int(h.st.f.Fd()), "", int(flags)|unix.AT_EMPTY_PATH, int(mask), &x); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatx(&x)
	out.Size = uint64(h.st.size)
	out.Blocks = max(out.Blocks, (out.Size+511)/512)
	return 0
}

// Setattr keeps size changes pending and applies everything else
// (mode, owner, times) to the backing file at once.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if !isRegular(n.inode()) {
		if n.c.cut.Load() {
			return n.LoopbackNode.Getattr(ctx, f, out)
		}
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	var st *fileState
	if h, ok := f.(*handle); ok {
		st = h.st
	} else {
		key := keyOf(n.inode())
		s, errno := n.c.acquire(key, n.backingPath(), syscall.O_RDONLY)
		if errno != 0 {
			return errno
		}
		defer n.c.release(key, s)
		st = s
	}
	if n.c.cut.Load() {
		return st.attr(&out.Attr)
	}
	if sz, ok := in.GetSize(); ok {
		n.c.truncate(st, int64(sz))
		in.Valid &^= fuse.FATTR_SIZE
	}
	const other = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_ATIME |
		fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW
	if in.Valid&other != 0 {
		var tmp fuse.AttrOut
		if errno := n.LoopbackNode.Setattr(ctx, nil, in, &tmp); errno != 0 {
			return errno
		}
	}
	return st.attr(&out.Attr)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !isRegular(n.inode()) {
		return n.LoopbackNode.Open(ctx, flags)
	}
	key := keyOf(n.inode())
	st, errno := n.c.acquire(key, n.backingPath(), flags)
	if errno != 0 {
		return nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		n.c.truncate(st, 0)
	}
	return &handle{c: n.c, key: key, st: st}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer done()
	ch, fh, _, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	lf := fh.(*fs.LoopbackFile)
	defer lf.Release(ctx)
	n.c.record("create", n.childPath(name), "", n.inode())
	fd, _ := lf.PassthroughFd()
	key := keyOf(ch)
	st, errno := n.c.acquire(key, "/proc/self/fd/"+strconv.Itoa(fd), flags)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		n.c.truncate(st, 0)
	}
	n.c.patchSize(key, &out.Attr)
	return ch, &handle{c: n.c, key: key, st: st}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.c.record("mkdir", n.childPath(name), "", n.inode())
	}
	return ch, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	ch, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.c.record("mknod", n.childPath(name), "", n.inode())
	}
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	ch, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	if errno == 0 {
		n.c.record("symlink", n.childPath(name), "", n.inode())
	}
	return ch, errno
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	ch, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno == 0 {
		n.c.record("link", n.childPath(name), target.EmbeddedInode().Path(nil), n.inode())
		if isRegular(ch) {
			n.c.patchSize(keyOf(ch), &out.Attr)
		}
	}
	return ch, errno
}

// lastLink returns the inode of name in dir if it is a regular file with
// a single link, whose state must be orphaned once the name is gone.
func lastLink(dir *node, name string) *fs.Inode {
	ch := dir.inode().GetChild(name)
	if ch == nil || !isRegular(ch) {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir.backingPath(), name), &st); err != nil || st.Nlink != 1 {
		return nil
	}
	return ch
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return errno
	}
	defer done()
	victim := lastLink(n, name)
	errno = n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 {
		n.c.record("unlink", n.childPath(name), "", n.inode())
		if victim != nil {
			n.c.orphan(keyOf(victim))
		}
	}
	return errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return errno
	}
	defer done()
	errno = n.LoopbackNode.Rmdir(ctx, name)
	if errno == 0 {
		n.c.record("rmdir", n.childPath(name), "", n.inode())
	}
	return errno
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	done, errno := n.c.beginNS()
	if errno != 0 {
		return errno
	}
	defer done()
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	var victim *fs.Inode
	if flags&unix.RENAME_EXCHANGE == 0 {
		victim = lastLink(np, newName)
		if src := n.inode().GetChild(name); victim != nil && src != nil && keyOf(src) == keyOf(victim) {
			victim = nil // rename between two names of one file is a no-op
		}
	}
	from, to := n.childPath(name), np.childPath(newName)
	errno = n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 {
		n.c.record("rename", to, from, n.inode(), np.inode())
		if victim != nil {
			n.c.orphan(keyOf(victim))
		}
	}
	return errno
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.c.cut.Load() {
		return syscall.EROFS
	}
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.c.cut.Load() {
		return syscall.EROFS
	}
	return n.LoopbackNode.Removexattr(ctx, attr)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: fh, n: n}, fl, 0
}

// Tmpfile refuses O_TMPFILE: such files have no name to load them by.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// CopyFileRange makes the kernel fall back to reads and writes, which go
// through the cache.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// handle is an open regular file. All handles of a file share its
// fileState, so the kernel may write back mmap'd pages through any of
// them.
type handle struct {
	c   *cutFS
	key fileKey
	st  *fileState
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileWritever  = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.st.read(dest, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.c.write(h.st, [][]byte{data}, off)
}

func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	return h.c.write(h.st, data, off)
}

// Fsync makes the file's dirty data and pending size durable. It serves
// fsync, fdatasync and msync(MS_SYNC), which the kernel turns into
// writes of the dirty pages followed by FSYNC.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.c.sync(h.st)
}

// Flush (close) makes nothing durable.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.c.release(h.key, h.st)
	return 0
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.c.allocate(h.st, int64(off), int64(size), mode)
}

// dirHandle wraps a loopback directory stream to see fsyncs of the
// directory.
type dirHandle struct {
	inner fs.FileHandle
	n     *node
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if d.n.c.cut.Load() {
		return 0
	}
	if s, ok := d.inner.(fs.FileFsyncdirer); ok {
		if errno := s.Fsyncdir(ctx, flags); errno != 0 {
			return errno
		}
	}
	d.n.c.dirSynced(keyOf(d.n.inode()))
	return 0
}
