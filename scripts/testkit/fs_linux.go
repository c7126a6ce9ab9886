package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MountFS mounts a new file system of kind (tmpfs, or ext4 on a loop
// device) of size bytes on a new directory and returns it. See MountFSOn.
func MountFS(t testing.TB, kind string, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	MountFSOn(t, kind, size, dir)
	return dir
}

// MountFSOn mounts a new file system of kind of size bytes on dir; it is
// unmounted when the test ends. It needs root, and mkfs.ext4 (e2fsprogs)
// for ext4: scripts/test.sh installs it. The ext4 file system reserves
// no blocks for root, who runs the tests.
func MountFSOn(t testing.TB, kind string, size int64, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a file system: run it as root (scripts/test.sh does)")
	}
	switch kind {
	case "tmpfs":
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
	case "ext4":
		mkfs, err := exec.LookPath("mkfs.ext4")
		if err != nil {
			t.Fatalf("this test needs mkfs.ext4: scripts/test.sh installs it (apt-get install e2fsprogs): %v", err)
		}
		img := filepath.Join(t.TempDir(), "fs.img")
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, size); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v\n%s", err, out)
		}
		if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
			t.Fatalf("mount -o loop: %v\n%s", err, out)
		}
	default:
		t.Fatalf("unknown file system %q", kind)
	}
	t.Cleanup(func() {
		for i := 0; ; i++ {
			err := unix.Unmount(dir, 0)
			if err == nil {
				return
			}
			if i == 50 {
				// Still busy after 5 s: detach it.
				t.Logf("unmount %s: %v; detaching it", dir, err)
				if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
					t.Errorf("unmount %s: %v", dir, err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond) // a process that was killed may still hold a file
		}
	})
}

// FreeBytes returns the bytes free, to this process, on the file system
// of dir.
func FreeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Fill creates the file path, or adds to it, so that leave bytes stay
// free on its file system; with leave 0, none at all: it writes until
// ENOSPC.
func Fill(t testing.TB, path string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := FreeBytes(t, filepath.Dir(path)) - leave; n > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil && !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("fallocate %s: %v", path, err)
		}
	}
	if leave > 0 {
		return
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); errors.Is(err, unix.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}
