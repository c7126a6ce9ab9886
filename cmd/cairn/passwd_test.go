package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/gateway"
)

func TestRunPasswd(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	addUser(t, file, "kitchen", "one")
	addUser(t, file, "garage", "two")
	addUser(t, file, "kitchen", "three")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "three") || strings.Count(string(data), "\n") != 2 {
		t.Errorf("password file:\n%s\nwant two hashed lines", data)
	}
	p, err := gateway.ParsePasswords(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, password string
		want           bool
	}{{"kitchen", "three", true}, {"kitchen", "one", false}, {"garage", "two", true}} {
		if ok, _ := p.Check(c.user, []byte(c.password)); ok != c.want {
			t.Errorf("Check(%s, %s) = %v, want %v", c.user, c.password, ok, c.want)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	stdin, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-file", file, "a/b"}, `user "a/b": not a valid user name`},
		{[]string{"-file", file, "attic"}, "no password on stdin"},
		{[]string{"-file", writeFile(t, t.TempDir(), "plain", []byte("kitchen:secret\n"), 0o600), "attic"}, "not a bcrypt hash"},
	} {
		err := runPasswd(c.args, stdin, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cairn passwd %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestLoadConfig_SecurityFiles: the files the security keys name are read
// with the configuration, so that check-config and the start fail on a bad
// one with the file, the key and the reason.
func TestLoadConfig_SecurityFiles(t *testing.T) {
	dir := t.TempDir()
	plain := writeFile(t, dir, "passwd", []byte("kitchen:secret\n"), 0o600)
	acl := writeFile(t, dir, "acl", []byte("user dashboard\nsubscribe sensors/#\n"), 0o644)
	for _, c := range []struct{ yaml, want string }{
		{"mqtt:\n  embedded:\n    password_file: " + plain + "\n",
			"mqtt.embedded.password_file: " + plain + `: line 1: user "kitchen": not a bcrypt hash (make one with cairn passwd)`},
		{"mqtt:\n  embedded:\n    acl_file: " + acl + "\n",
			"mqtt.embedded.acl_file: " + acl + `: line 2: unknown keyword "subscribe"`},
		{"mqtt:\n  embedded:\n    tls_listen: \"127.0.0.1:8883\"\n    tls:\n      cert_file: " + filepath.Join(dir, "none.pem") + "\n      key_file: " + plain + "\n",
			"mqtt.embedded.tls: open " + filepath.Join(dir, "none.pem")},
	} {
		path := writeFile(t, dir, "cairn.yaml", []byte(c.yaml), 0o600)
		_, err := LoadConfig(path)
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), path+": "+c.want) {
			t.Errorf("got %v, want a configuration error with %q", err, c.want)
		}
	}
}
