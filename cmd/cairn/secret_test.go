package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // umask does not apply to Chmod
			t.Fatal(err)
		}
		return p
	}

	good := write("good", "s3cret\n", 0o600)
	if b, err := readSecret(good); err != nil || string(b) != "s3cret" {
		t.Fatalf("readSecret(good) = %q, %v; want s3cret", b, err)
	}
	open := write("open", "s3cret", 0o644)
	if _, err := readSecret(open); err == nil || !strings.Contains(err.Error(), "chmod 600 "+open) {
		t.Fatalf("world-readable secret: err = %v; want the file and the fix", err)
	}
	empty := write("empty", " \n", 0o600)
	if _, err := readSecret(empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty secret: err = %v", err)
	}
	if _, err := readSecret(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing secret file: no error")
	}

	// A bare name is looked up in systemd's credentials directory.
	write("uplink-token", "from-credentials", 0o400)
	t.Setenv(credentialsDirEnv, dir)
	if b, err := readSecret("uplink-token"); err != nil || string(b) != "from-credentials" {
		t.Fatalf("readSecret via %s = %q, %v", credentialsDirEnv, b, err)
	}
}
