package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// TestStatus_WithoutConfig runs cairn on its default HTTP address,
// 127.0.0.1:8080, with a token, in a network namespace of its own, and
// `cairn status` without a configuration: it asks that address, says a
// token is needed, and takes one from -token, -token-file or the
// configuration's http.token_file, at -url host:port as well as a URL.
// Given the configuration, it reads neither the broker's password file nor
// any other secret but the token.
func TestStatus_WithoutConfig(t *testing.T) {
	bin := cairnBinary.get(t)
	ns := testkit.NewNetns(t)
	dir := t.TempDir()
	const token = "status-test-token-0123456789abcdef"
	tokenFile := writeFile(t, dir, "http-token", []byte(token+"\n"), 0o600)
	hash, err := gateway.HashPassword([]byte("kitchen-secret"))
	if err != nil {
		t.Fatal(err)
	}
	passwd := writeFile(t, dir, "passwd", []byte("kitchen:"+hash+"\n"), 0o600)
	cfg := writeConfig(t, filepath.Join(dir, "data"), `
data_dir: %DATA%
mqtt:
  embedded:
    password_file: `+passwd+`
http:
  token_file: `+tokenFile+`
`)
	name, args := ns.Command(bin, "run", "-config", cfg)
	p := newCairnProcess(testkit.StartCairn(t, nil, startTimeout, name, args...))
	if p.http != "127.0.0.1:8080" {
		t.Fatalf("cairn listens on %s, want its default 127.0.0.1:8080", p.http)
	}
	status := func(args ...string) (string, error) {
		name, args := ns.Command(bin, append([]string{"status", "-sample", "0"}, args...)...)
		out, err := exec.Command(name, args...).CombinedOutput()
		return string(out), err
	}
	const ok = "mqtt:   embedded broker 127.0.0.1:1883, listening"

	out, err := status()
	if err == nil || !strings.Contains(out, "http://127.0.0.1:8080 answered 401") || !strings.Contains(out, "-token-file") {
		t.Errorf("cairn status without a token: %v, want 401 from http://127.0.0.1:8080 and a word about -token-file:\n%s", err, out)
	}
	out, err = status("-token", "not-"+token)
	if err == nil || !strings.Contains(out, "the token from -token is not the gateway's") {
		t.Errorf("cairn status -token WRONG: %v, want a 401 that says the token is wrong:\n%s", err, out)
	}
	for _, args := range [][]string{
		{"-token", token},
		{"-token-file", tokenFile},
		{"-url", "127.0.0.1:8080", "-token-file", tokenFile},
		{"-url", "http://127.0.0.1:8080/", "-token", token},
		{"-config", cfg},
	} {
		if out, err := status(args...); err != nil || !strings.Contains(out, ok) {
			t.Errorf("cairn status %s: %v, want %q in:\n%s", strings.Join(args, " "), err, ok, out)
		}
	}
	// The password file is the broker's business, not status's.
	if err := os.Remove(passwd); err != nil {
		t.Fatal(err)
	}
	if out, err := status("-config", cfg); err != nil || !strings.Contains(out, ok) {
		t.Errorf("cairn status -config with the broker's password file gone: %v, want %q in:\n%s", err, ok, out)
	}
}

// TestStatus_SaysWhyRefused runs cairn with a token and `cairn status`
// with a wrong one until cairn answers 429: status then says why (too
// many failed authentications, and when to try again), not only the code.
func TestStatus_SaysWhyRefused(t *testing.T) {
	bin := cairnBinary.get(t)
	dir := t.TempDir()
	tokenFile := writeFile(t, dir, "http-token", []byte("status-refusal-token-0123456789\n"), 0o600)
	cfg := writeConfig(t, filepath.Join(dir, "data"), localConfig+"  token_file: "+tokenFile+"\n")
	p := startCairn(t, bin, cfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(bin, "status", "-sample", "0", "-url", p.http, "-token", "not-the-gateways-token").CombinedOutput()
		if err == nil {
			t.Fatalf("cairn status with a wrong token succeeded:\n%s", out)
		}
		if strings.Contains(string(out), "answered 429") { // not the port's digits
			if !strings.Contains(string(out), "too many failed authentications from your address; try again in") {
				t.Fatalf("cairn status answered 429 without the reason:\n%s", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 429 after 30 s of wrong tokens; last:\n%s", out)
		}
	}
}
