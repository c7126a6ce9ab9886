package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-gateway/cairn/scripts/testkit"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// The test binary doubles as the Badger client that runs on the mount:
// with childEnv set it plays that role instead of running the tests.
const childEnv = "CUTFS_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "badger-write":
		os.Exit(badgerWriter())
	case "badger-verify":
		os.Exit(badgerVerify())
	}
	raceBuild = testkit.RaceEnabled()
	if raceBuild {
		// Under -race the daemon gets the race detector too.
		cutfsBinary.Flags = []string{"-race"}
	}
	code := m.Run()
	cutfsBinary.Remove()
	os.Exit(code)
}

// The command under test, and whether the tests run with -race: TestMain
// sets both before any test runs.
var (
	cutfsBinary = testkit.Binary{Pkg: "."}
	raceBuild   bool
)

// childEnviron is the environment of child processes; race-enabled
// children would otherwise linger a second at exit.
func childEnviron(extra ...string) []string {
	env := append(os.Environ(), extra...)
	if raceBuild {
		env = append(env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	return env
}

// proc is a child process whose stdout is read line by line.
type proc struct {
	t                *testing.T
	name, stderrPath string
	cmd              *exec.Cmd
	lines            chan string
	done             chan struct{}
	err              error // valid once done is closed
}

func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cmd: cmd, lines: make(chan string, 1<<14), done: make(chan struct{}),
		stderrPath: filepath.Join(t.TempDir(), "stderr")}
	if cmd.Env == nil {
		cmd.Env = childEnviron()
	}
	stderr, err := os.Create(p.stderrPath)
	must(t, err)
	defer stderr.Close()
	r, w, err := os.Pipe()
	must(t, err)
	cmd.Stdout, cmd.Stderr = w, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	w.Close()
	go func() {
		for sc := bufio.NewScanner(r); sc.Scan(); {
			p.lines <- sc.Text()
		}
		r.Close()
		close(p.lines)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *proc) stderr() string {
	b, _ := os.ReadFile(p.stderrPath)
	return string(b)
}

// waitLine returns the next stdout line starting with prefix.
func (p *proc) waitLine(prefix string, timeout time.Duration) string {
	p.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				p.t.Fatalf("%s exited (%v) before printing %q; stderr:\n%s", p.name, p.err, prefix, p.stderr())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timer.C:
			p.t.Fatalf("%s printed no %q within %v; stderr:\n%s", p.name, prefix, timeout, p.stderr())
		}
	}
}

// stop sends sig (unless nil) and waits for the exit, killing the
// process after timeout. It returns why the process did not exit 0.
func (p *proc) stop(sig os.Signal, timeout time.Duration) error {
	if sig != nil {
		p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("no exit within %v", timeout)
	}
}

// cutfsProc is a running cutfs mount.
type cutfsProc struct {
	*proc
	backing, mnt string
}

func (c *cutfsProc) m(name string) string { return filepath.Join(c.mnt, name) }
func (c *cutfsProc) b(name string) string { return filepath.Join(c.backing, name) }

func mountCutfs(t *testing.T, backing, mnt string) *cutfsProc {
	t.Helper()
	// Fail, never skip, when mounting is impossible: these tests are
	// the only check of the crash harness.
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("cutfs tests need /dev/fuse to mount a FUSE file system: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("cutfs tests must run as root to mount FUSE file systems (euid is %d)", os.Geteuid())
	}
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(cutfsBinary.Path(t), "-backing", backing, "-mount", mnt, "-ready", ready)
	c := &cutfsProc{proc: startProc(t, "cutfs", cmd), backing: backing, mnt: mnt}
	t.Cleanup(func() {
		c.stop(syscall.SIGTERM, 10*time.Second)
		if testkit.IsMounted(mnt) {
			exec.Command("fusermount3", "-u", "-z", mnt).Run()
		}
		if s := c.stderr(); strings.Contains(s, "DATA RACE") {
			t.Errorf("race detected in cutfs:\n%s", s)
		}
	})
	c.waitLine("cutfs: mounted", 30*time.Second)
	if b, err := os.ReadFile(ready); err != nil || string(b) != "ready\n" {
		t.Fatalf("ready file: %q, %v", b, err)
	}
	if !testkit.IsMounted(mnt) {
		t.Fatalf("cutfs said mounted, but %s is not a mount point", mnt)
	}
	return c
}

func newMount(t *testing.T) *cutfsProc {
	t.Helper()
	return mountCutfs(t, t.TempDir(), t.TempDir())
}

type cutReportLine struct {
	droppedBytes, droppedFiles, unsyncedNames int
	names                                     []string // "op=... path=..."
}

// cut sends SIGUSR1 and parses the report.
func (c *cutfsProc) cut() cutReportLine {
	c.t.Helper()
	must(c.t, c.cmd.Process.Signal(syscall.SIGUSR1))
	l := c.waitLine("cutfs: cut ", 30*time.Second)
	var r cutReportLine
	if _, err := fmt.Sscanf(l, "cutfs: cut dropped_bytes=%d dropped_files=%d unsynced_names=%d",
		&r.droppedBytes, &r.droppedFiles, &r.unsyncedNames); err != nil {
		c.t.Fatalf("bad cut report %q: %v", l, err)
	}
	for range r.unsyncedNames {
		n := c.waitLine("cutfs: unsynced-name ", 10*time.Second)
		r.names = append(r.names, strings.TrimPrefix(n, "cutfs: unsynced-name "))
	}
	return r
}

// unmount stops cutfs with SIGTERM and checks that it exits 0 and the
// mount is gone.
func (c *cutfsProc) unmount() {
	c.t.Helper()
	if err := c.stop(syscall.SIGTERM, 30*time.Second); err != nil {
		c.t.Fatalf("cutfs: %v; stderr:\n%s", err, c.stderr())
	}
	if testkit.IsMounted(c.mnt) {
		c.t.Fatalf("%s still mounted after cutfs exited", c.mnt)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// readDirect reads a file with O_DIRECT, which bypasses the kernel page
// cache, so the bytes come from cutfs.
func readDirect(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func daemonRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := readDirect(path)
	must(t, err)
	return b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

func writeAt(t *testing.T, f *os.File, data string, off int64) {
	t.Helper()
	_, err := f.WriteAt([]byte(data), off)
	must(t, err)
}

func wantSize(t *testing.T, path string, want int64) {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Size() != want {
		t.Fatalf("stat %s: size %d, want %d", path, fi.Size(), want)
	}
}

// writeFile writes data to a new or existing file, fsyncing if asked.
func writeFile(t *testing.T, path, data string, fsync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	defer f.Close()
	_, err = f.WriteString(data)
	must(t, err)
	if fsync {
		must(t, f.Sync())
	}
}

func fsyncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	must(t, err)
	defer d.Close()
	must(t, d.Sync())
}

func TestUnsyncedWriteIsLost(t *testing.T) {
	c := newMount(t)
	const data = "hello, volatile world"
	writeFile(t, c.m("a"), data, false)
	if got := string(readFile(t, c.m("a"))); got != data {
		t.Fatalf("read through the page cache: %q, want %q", got, data)
	}
	if got := string(daemonRead(t, c.m("a"))); got != data {
		t.Fatalf("read from cutfs: %q, want %q", got, data)
	}
	if got := readFile(t, c.b("a")); len(got) != 0 {
		t.Fatalf("backing file has %q before any fsync", got)
	}

	r := c.cut()
	if r.droppedBytes != len(data) || r.droppedFiles != 1 {
		t.Errorf("cut report %+v, want dropped_bytes=%d dropped_files=1", r, len(data))
	}
	if got := readFile(t, c.m("a")); len(got) != 0 {
		t.Errorf("after the cut the mount still shows %q", got)
	}
	c.unmount()
	if got := readFile(t, c.b("a")); len(got) != 0 {
		t.Fatalf("backing file has %q after the cut", got)
	}
}

func TestFsyncedWriteSurvives(t *testing.T) {
	c := newMount(t)
	writeFile(t, c.m("log"), "one;", true)
	f, err := os.OpenFile(c.m("log"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("two;")
	must(t, err)
	must(t, unix.Fdatasync(int(f.Fd())))
	_, err = f.WriteString("three;")
	must(t, err)
	must(t, f.Close())

	if got := string(daemonRead(t, c.m("log"))); got != "one;two;three;" {
		t.Fatalf("read from cutfs: %q", got)
	}
	if got := string(readFile(t, c.b("log"))); got != "one;two;" {
		t.Fatalf("backing before the cut: %q, want the synced prefix", got)
	}
	r := c.cut()
	if r.droppedBytes != len("three;") || r.droppedFiles != 1 {
		t.Errorf("cut report %+v, want dropped_bytes=6 dropped_files=1", r)
	}
	c.unmount()
	if got := string(readFile(t, c.b("log"))); got != "one;two;" {
		t.Fatalf("backing after the cut: %q, want %q", got, "one;two;")
	}
}

func TestMmapMsync(t *testing.T) {
	c := newMount(t)
	const size2 = 2 * pageSize
	zeros := make([]byte, pageSize)
	f, err := os.OpenFile(c.m("mapped"), os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	defer f.Close()
	// The size is pending: the backing file stays empty, yet mapping
	// and touching both pages must not fault.
	must(t, f.Truncate(size2))
	wantSize(t, c.m("mapped"), size2)
	m, err := unix.Mmap(int(f.Fd()), 0, size2, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	must(t, err)
	defer unix.Munmap(m) // on failure; a second Munmap is a no-op
	copy(m, "mmap-synced")
	must(t, unix.Msync(m[:pageSize], unix.MS_SYNC))
	b := readFile(t, c.b("mapped"))
	if len(b) != size2 || !bytes.HasPrefix(b, []byte("mmap-synced")) {
		t.Fatalf("backing after msync: %d bytes, prefix %q", len(b), b[:min(len(b), 11)])
	}

	copy(m[pageSize:], "mmap-lost")
	must(t, unix.Munmap(m))
	must(t, f.Close())
	if got := daemonRead(t, c.m("mapped")); !bytes.HasPrefix(got[pageSize:], []byte("mmap-lost")) {
		t.Fatalf("written-back page not seen by cutfs: %q", got[pageSize:pageSize+9])
	}
	if b := readFile(t, c.b("mapped")); !bytes.Equal(b[pageSize:], zeros) {
		t.Fatalf("unsynced mmap page reached the backing file")
	}

	r := c.cut()
	if r.droppedFiles != 1 || r.droppedBytes < len("mmap-lost") {
		t.Errorf("cut report %+v, want one file with the unsynced page", r)
	}
	c.unmount()
	b = readFile(t, c.b("mapped"))
	if len(b) != size2 || !bytes.HasPrefix(b, []byte("mmap-synced")) || !bytes.Equal(b[pageSize:], zeros) {
		t.Fatalf("backing after the cut: %d bytes, page 0 %q, page 1 %q", len(b), b[:11], b[pageSize:pageSize+9])
	}
}

func TestPendingSize(t *testing.T) {
	c := newMount(t)
	orig := strings.Repeat("0123456789", 10)
	writeFile(t, c.m("sized"), orig, true)
	must(t, os.Truncate(c.m("sized"), 10)) // by path, without a file handle
	wantSize(t, c.m("sized"), 10)
	f, err := os.OpenFile(c.m("sized"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(1<<20)) // ftruncate extends again
	wantSize(t, c.m("sized"), 1<<20)
	got := daemonRead(t, c.m("sized"))
	if len(got) != 1<<20 || string(got[:10]) != orig[:10] || !bytes.Equal(got[10:100], make([]byte, 90)) {
		t.Fatalf("truncate+extend must read zeros past the truncation point, got %q", got[:100])
	}
	must(t, f.Close())
	wantSize(t, c.b("sized"), 100)

	// O_TRUNC is a pending size change too.
	writeFile(t, c.m("otrunc"), "keep me", true)
	ft, err := os.OpenFile(c.m("otrunc"), os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	must(t, ft.Close())
	wantSize(t, c.m("otrunc"), 0)

	r := c.cut()
	if r.droppedFiles != 2 || r.droppedBytes != 0 {
		t.Errorf("cut report %+v, want dropped_files=2 dropped_bytes=0", r)
	}
	c.unmount()
	if b := string(readFile(t, c.b("sized"))); b != orig {
		t.Fatalf("backing after the cut: %q, want %q", b, orig)
	}
	if b := string(readFile(t, c.b("otrunc"))); b != "keep me" {
		t.Fatalf("backing after the cut: %q, want %q", b, "keep me")
	}
}

func TestWritesAfterCutAreIgnored(t *testing.T) {
	c := newMount(t)
	f, err := os.OpenFile(c.m("f"), os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	defer f.Close()
	writeAt(t, f, "before", 0)
	must(t, f.Sync())

	c.cut()
	// The writer does not notice: everything succeeds and vanishes.
	writeAt(t, f, "after!", 0)
	writeAt(t, f, "more", 100)
	must(t, f.Sync())
	must(t, f.Truncate(1))
	if got := string(daemonRead(t, c.m("f"))); got != "before" {
		t.Fatalf("cutfs serves %q after the cut, want the backing state", got)
	}
	if err := os.WriteFile(c.m("new"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("create after the cut: %v, want EROFS", err)
	}
	must(t, f.Close())
	c.unmount()
	if got := string(readFile(t, c.b("f"))); got != "before" {
		t.Fatalf("backing after the cut: %q, want %q", got, "before")
	}
}

func TestUnsyncedNames(t *testing.T) {
	c := newMount(t)
	must(t, os.Mkdir(c.m("d"), 0o755))
	writeFile(t, c.m("x"), "", false)
	fsyncDir(t, c.mnt) // covers mkdir d and create x
	writeFile(t, c.m("d/f"), "", false)
	fsyncDir(t, c.m("d")) // covers create d/f
	must(t, os.Rename(c.m("d/f"), c.m("d/g")))
	writeFile(t, c.m("y"), "", false)
	must(t, os.Remove(c.m("x")))

	r := c.cut()
	want := []string{"op=rename path=d/g from=d/f", "op=create path=y", "op=unlink path=x"}
	if r.unsyncedNames != len(want) || strings.Join(r.names, "\n") != strings.Join(want, "\n") {
		t.Errorf("unsynced names %q, want %q", r.names, want)
	}
	c.unmount()
	// Name changes are durable at once; they are only reported.
	for p, want := range map[string]bool{"d/g": true, "y": true, "x": false, "d/f": false} {
		if _, err := os.Stat(c.b(p)); (err == nil) != want {
			t.Errorf("backing has %s: %v (%v), want %v", p, err == nil, err, want)
		}
	}
}

// TestRandomOpsMatchModel runs random writes, truncates, fallocates and
// fsyncs on several files in parallel against a model: reads see the
// latest state, the backing files the last synced one.
func TestRandomOpsMatchModel(t *testing.T) {
	c := newMount(t)
	durable := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range durable {
		wg.Go(func() { durable[i] = randomOps(t, c, fmt.Sprintf("r%d", i), uint64(i)) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	c.cut()
	c.unmount()
	for i, want := range durable {
		if got := readFile(t, c.b(fmt.Sprintf("r%d", i))); !bytes.Equal(got, want) {
			t.Errorf("r%d after the cut: %d bytes, want the %d synced bytes", i, len(got), len(want))
		}
	}
}

// randomOps returns the content as of the last fsync. It runs in its own
// goroutine, so it reports with t.Errorf and returns.
func randomOps(t *testing.T, c *cutfsProc, name string, seed uint64) []byte {
	src := rand.NewChaCha8([32]byte{byte(seed)})
	rng := rand.New(src)
	f, err := os.OpenFile(c.m(name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer f.Close()
	var logical, durable []byte
	resize := func(n int) {
		logical = append(logical[:min(n, len(logical))], make([]byte, max(0, n-len(logical)))...)
	}
	for op := range 300 {
		var err error
		switch k := rng.IntN(10); {
		case k < 5:
			off, buf := rng.IntN(12*pageSize), make([]byte, 1+rng.IntN(3*pageSize))
			src.Read(buf)
			_, err = f.WriteAt(buf, int64(off))
			resize(max(len(logical), off+len(buf)))
			copy(logical[off:], buf)
		case k < 7:
			n := rng.IntN(14 * pageSize)
			err = f.Truncate(int64(n))
			resize(n)
		case k < 8:
			off, n := rng.IntN(12*pageSize), 1+rng.IntN(4*pageSize)
			err = unix.Fallocate(int(f.Fd()), 0, int64(off), int64(n))
			resize(max(len(logical), off+n))
		default:
			if err = f.Sync(); err == nil {
				durable = bytes.Clone(logical)
				if b, _ := os.ReadFile(c.b(name)); !bytes.Equal(b, durable) {
					err = errors.New("backing differs from the model after fsync")
				}
			}
		}
		if err == nil && op%10 == 0 {
			if got, rerr := readDirect(c.m(name)); rerr != nil || !bytes.Equal(got, logical) {
				err = fmt.Errorf("cutfs serves %d bytes (%v), the model has %d", len(got), rerr, len(logical))
			}
		}
		if err != nil {
			t.Errorf("%s op %d: %v", name, op, err)
			return nil
		}
	}
	return durable
}

// Badger check: a child process writes keys to Badger on the mount and
// is killed with SIGKILL, power is cut, and Badger reopens on a new
// mount.
const (
	badgerTarget = 2000 // keys acknowledged before the kill
	badgerTxn    = 10   // keys per transaction
	badgerCycles = 3
)

func TestBadgerSyncedKeysSurvive(t *testing.T) {
	acked, lost := runBadgerCycles(t, true)
	t.Logf("with db.Sync: %d keys acknowledged, %d lost", acked, lost)
	if lost != 0 {
		t.Fatalf("%d of %d keys acknowledged after db.Sync were lost", lost, acked)
	}
}

func TestBadgerUnsyncedKeysAreLost(t *testing.T) {
	acked, lost := runBadgerCycles(t, false)
	t.Logf("without db.Sync: %d keys acknowledged, %d lost", acked, lost)
	if lost == 0 {
		t.Fatalf("no key was lost without db.Sync in %d cycles: cutfs simulates nothing", badgerCycles)
	}
}

// runBadgerCycles runs write, kill, cut and reopen cycles on one Badger
// directory and returns the keys acknowledged and those missing after
// the reopens. With withSync, each cycle rechecks the earlier ones' too.
func runBadgerCycles(t *testing.T, withSync bool) (acked, lost int) {
	backing, mnt := t.TempDir(), t.TempDir()
	dbDir := filepath.Join(mnt, "db")
	var ranges []string
	for cycle := range badgerCycles {
		base := cycle * 1_000_000
		c := mountCutfs(t, backing, mnt)
		n := runBadgerWriter(t, dbDir, base, withSync)
		r := c.cut()
		c.unmount()
		acked += n
		if !withSync {
			ranges = nil
		}
		ranges = append(ranges, fmt.Sprintf("%d:%d", base, n))
		c = mountCutfs(t, backing, mnt)
		missing, opens := runBadgerVerify(t, dbDir, ranges)
		c.unmount()
		lost += missing
		t.Logf("cycle %d: %d keys acknowledged; cut dropped %d bytes in %d files, %d unsynced names; "+
			"reopen took %d badger.Open calls; %d keys missing", cycle, n,
			r.droppedBytes, r.droppedFiles, r.unsyncedNames, opens, missing)
	}
	return acked, lost
}

// startChild runs the test binary in a child role.
func startChild(t *testing.T, name string, env ...string) *proc {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = childEnviron(env...)
	return startProc(t, name, cmd)
}

// runBadgerWriter writes keys until badgerTarget are acknowledged, kills
// the writer and returns the number it acknowledged.
func runBadgerWriter(t *testing.T, dir string, base int, withSync bool) int {
	t.Helper()
	p := startChild(t, "badger writer", childEnv+"=badger-write", "CUTFS_BADGER_DIR="+dir,
		"CUTFS_BADGER_BASE="+strconv.Itoa(base), "CUTFS_BADGER_SYNC="+strconv.FormatBool(withSync))
	deadline := time.After(90 * time.Second)
	acked, killed := 0, false
	for {
		select {
		case l, ok := <-p.lines:
			if !ok { // drained: the lines printed before the kill count
				<-p.done
				if !killed {
					t.Fatalf("badger writer exited (%v) after %d keys; stderr:\n%s", p.err, acked, p.stderr())
				}
				return acked
			}
			if n, err := strconv.Atoi(strings.TrimPrefix(l, "acked ")); err == nil {
				acked = max(acked, n)
			}
			if acked >= badgerTarget && !killed {
				must(t, p.cmd.Process.Kill())
				killed = true
			}
		case <-deadline:
			p.cmd.Process.Kill()
			t.Fatalf("badger writer acknowledged only %d keys in time; stderr:\n%s", acked, p.stderr())
		}
	}
}

// runBadgerVerify reopens Badger and returns how many keys of the ranges
// ("base:n") are missing or wrong, and how many opens it took.
func runBadgerVerify(t *testing.T, dir string, ranges []string) (missing, opens int) {
	t.Helper()
	p := startChild(t, "badger verify", childEnv+"=badger-verify",
		"CUTFS_BADGER_DIR="+dir, "CUTFS_BADGER_RANGES="+strings.Join(ranges, ","))
	l := p.waitLine("verified ", 60*time.Second)
	if _, err := fmt.Sscanf(l, "verified missing=%d opens=%d", &missing, &opens); err != nil {
		t.Fatalf("bad verify line %q: %v", l, err)
	}
	if err := p.stop(nil, 60*time.Second); err != nil {
		t.Fatalf("badger verify: %v; stderr:\n%s", err, p.stderr())
	}
	return missing, opens
}

func badgerKey(i int) []byte { return []byte(fmt.Sprintf("key-%09d", i)) }

// badgerValue is small for two keys in three and above ValueThreshold,
// so in the value log, for the third.
func badgerValue(i int) []byte {
	n := 100
	if i%3 == 0 {
		n = 2000
	}
	unit := []byte(strconv.Itoa(i) + "|")
	return bytes.Repeat(unit, n/len(unit)+1)[:n]
}

// openBadger opens the store and returns how many opens it took. After
// a cut, a memtable or value log file that was created but never synced
// is left empty; Badger fails an open on it with z.NewFile ("Create a
// new file") after sizing it and gets past it on the next open, so
// each such file costs one retry.
func openBadger(dir string) (*badger.DB, int, error) {
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithMemTableSize(8 << 20).
		WithValueThreshold(1 << 10).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(8 << 20).
		WithLogger(nil)
	for attempt := 1; ; attempt++ {
		db, err := badger.Open(opts)
		if err == nil || attempt == 4 || !strings.Contains(err.Error(), "Create a new file") {
			return db, attempt, err
		}
		fmt.Fprintf(os.Stderr, "open attempt %d failed, retrying: %v\n", attempt, err)
	}
}

func childFailed(what string, err error) int {
	fmt.Fprintln(os.Stderr, what+":", err)
	return 1
}

func badgerWriter() int {
	base, _ := strconv.Atoi(os.Getenv("CUTFS_BADGER_BASE"))
	doSync, _ := strconv.ParseBool(os.Getenv("CUTFS_BADGER_SYNC"))
	db, _, err := openBadger(os.Getenv("CUTFS_BADGER_DIR"))
	if err != nil {
		return childFailed("open", err)
	}
	// Runs until killed; the bound only stops a runaway child.
	for i := 0; i < 100*badgerTarget; i += badgerTxn {
		err := db.Update(func(txn *badger.Txn) error {
			for j := base + i; j < base+i+badgerTxn; j++ {
				if err := txn.Set(badgerKey(j), badgerValue(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil && doSync {
			err = db.Sync()
		}
		if err != nil {
			return childFailed("write", err)
		}
		fmt.Printf("acked %d\n", i+badgerTxn)
	}
	return 1
}

func badgerVerify() int {
	db, opens, err := openBadger(os.Getenv("CUTFS_BADGER_DIR"))
	if err != nil {
		return childFailed("open", err)
	}
	missing := 0
	for _, r := range strings.Split(os.Getenv("CUTFS_BADGER_RANGES"), ",") {
		var base, n int
		if _, err := fmt.Sscanf(r, "%d:%d", &base, &n); err != nil {
			return childFailed("range "+r, err)
		}
		err := db.View(func(txn *badger.Txn) error {
			for i := base; i < base+n; i++ {
				item, err := txn.Get(badgerKey(i))
				var v []byte
				if err == nil {
					v, err = item.ValueCopy(nil)
				}
				if err != nil || !bytes.Equal(v, badgerValue(i)) {
					missing++
				}
			}
			return nil
		})
		if err != nil {
			return childFailed("view", err)
		}
	}
	fmt.Printf("verified missing=%d opens=%d\n", missing, opens)
	if err := db.Close(); err != nil {
		return childFailed("close", err)
	}
	return 0
}
