package testkit

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RequireFUSE fails the test unless it can mount a FUSE file system such
// as cutfs: it runs as root, with /dev/fuse and fusermount3. It never
// skips: the tests that mount cutfs are the only proof of what they test.
func RequireFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test mounts the cutfs FUSE file system and must run as root (euid is %d)", os.Geteuid())
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("this test needs /dev/fuse to mount the cutfs FUSE file system: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Fatalf("this test needs fusermount3 to mount and unmount cutfs (apt-get install fuse3): %v", err)
	}
}

// IsMounted reports whether dir is a mount point of this process's mount
// namespace.
func IsMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// Cutfs is a running cutfs process (scripts/cutfs) and its mount: a FUSE
// layer over a backing directory that forgets every write not yet synced
// when told to cut the power (SIGUSR1).
type Cutfs struct {
	*Process
	Backing, Dir string // the backing directory and the mount point
}

// MountCutfs mounts backing at dir with a new process of the cutfs binary
// bin and waits up to timeout until the mount is live. When the test ends
// cutfs is stopped, if it is still running, and the mount taken down,
// lazily if it is stuck.
func MountCutfs(t testing.TB, bin, backing, dir string, timeout time.Duration) *Cutfs {
	t.Helper()
	c := &Cutfs{Process: StartProcess(t, nil, bin, "-backing", backing, "-mount", dir), Backing: backing, Dir: dir}
	t.Cleanup(func() {
		if c.Running() {
			if err := c.Stop(syscall.SIGTERM, timeout); err != nil {
				t.Errorf("cutfs: %v\noutput:\n%s", err, c.Out)
			}
		}
		if IsMounted(dir) {
			if out, err := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput(); err != nil {
				t.Errorf("fusermount3 -u -z %s: %v\n%s", dir, err, out)
			}
		}
	})
	if _, err := c.Out.WaitLine("cutfs: mounted", c.Exited(), timeout); err != nil {
		t.Fatalf("cutfs: %v (%v)\noutput:\n%s", err, c.Err(), c.Out)
	}
	if !IsMounted(dir) {
		t.Fatalf("cutfs said mounted, but %s is not a mount point", dir)
	}
	return c
}

// Unmount stops cutfs with SIGTERM, waiting up to timeout, and checks that
// it exits 0 and the mount is gone.
func (c *Cutfs) Unmount(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := c.Stop(syscall.SIGTERM, timeout); err != nil {
		t.Fatalf("unmount: cutfs: %v\noutput:\n%s", err, c.Out)
	}
	if IsMounted(c.Dir) {
		t.Fatalf("%s still mounted after cutfs exited", c.Dir)
	}
}
