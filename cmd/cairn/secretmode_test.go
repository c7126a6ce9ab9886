package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadSecret_Modes: a secret file may be read by its owner only, or
// also by its group when root owns it; never by others, nor written by its
// group.
func TestReadSecret_Modes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test gives files to other users and must run as root (euid %d)", os.Geteuid())
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		uid, gid int
		mode     os.FileMode
		ok       bool
	}{
		{"root's, 0600", 0, 0, 0o600, true},
		{"root's, 0400", 0, 0, 0o400, true},
		{"root's, group may read", 0, 2, 0o640, true},
		{"root's, group may write", 0, 2, 0o660, false},
		{"root's, others may read", 0, 2, 0o644, false},
		{"another user's, 0600", 1, 2, 0o600, true},
		{"another user's, group may read", 1, 2, 0o640, false},
	} {
		f := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-"), []byte("a-secret-of-some-length\n"), 0o600)
		if err := os.Chown(f, c.uid, c.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, c.mode); err != nil {
			t.Fatal(err)
		}
		_, err := readSecret(f)
		if (err == nil) != c.ok {
			t.Errorf("%s: readSecret: %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "run: chmod 600 "+f) {
			t.Errorf("%s: %v, want the fix in it", c.name, err)
		}
	}
}

// TestRunPasswd_KeepsOwnerAndMode: changing a password file keeps its
// owner, group and mode (TestRunPasswd: a new one, with no group cairn
// on this system, is 0600; TestPiGuide_LetSensorsIn: with one, 0640).
func TestRunPasswd_KeepsOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test gives files to other users and must run as root (euid %d)", os.Geteuid())
	}
	file := filepath.Join(t.TempDir(), "passwd")
	addUser(t, file, "kitchen", "one")
	if err := os.Chown(file, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	addUser(t, file, "garage", "two")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1 || st.Gid != 2 || fi.Mode().Perm() != 0o640 {
		t.Errorf("after cairn passwd: owner %d:%d mode %04o, want 1:2 0640 as before", st.Uid, st.Gid, fi.Mode().Perm())
	}
}
