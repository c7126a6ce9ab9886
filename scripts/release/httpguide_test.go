package release

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// httpGuideSection is the section of docs/security.md whose numbered
// steps runHTTPGuide runs, up to httpGuideEnd.
const (
	httpGuideSection = "## Opening HTTP to the network"
	httpGuideEnd     = "<!-- the steps above are run by scripts/release/httpguide_test.go -->"
)

// httpGateway is the board's address on its network in the test: not a
// loopback one, so that the steps are judged as a client on the network
// meets them.
const httpGateway = "192.0.2.10"

// runHTTPGuide runs the steps of docs/security.md's "Opening HTTP to the
// network" in the root of g, where the Pi guide has the service running:
// its shell lines (sh, head, base64 and chown are busybox's, copied into
// the root), its YAML merged into /etc/cairn/cairn.yaml, `systemctl
// restart cairn` as a restart of the unit's ExecStart, and curl from the
// network namespace with GATEWAY an address that is not loopback. Then
// `sudo cairn status -config` must read the token, the token file must be
// the cairn user's alone, and a client on the network must get 401
// without the token, 429 after ten wrong ones, and /healthz without one.
func runHTTPGuide(g *piGuide) {
	t := g.t
	t.Helper()
	curl := need(t, "curl", "curl")
	busybox(t, g.root, "sh", "head", "base64", "chown", "cat")
	if out, err := exec.Command("ip", "-n", g.ns.Name, "addr", "add", httpGateway+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s: %v\n%s", httpGateway, err, out)
	}
	steps := httpGuideSteps(t, filepath.Join(repo, "docs/security.md"))
	token := func() string {
		return strings.TrimSpace(string(readFile(t, filepath.Join(g.root, "etc/cairn/http-token"))))
	}
	for _, step := range steps {
		if step.yaml != nil {
			t.Logf("(in /etc/cairn/cairn.yaml)\n%s", step.yaml)
			g.config = step.yaml
			g.edit("/etc/cairn/cairn.yaml")
			continue
		}
		w := step.words
		t.Logf("$ %s", strings.Join(w, " "))
		switch {
		case strings.Join(w, " ") == "sudo systemctl restart cairn":
			if err := g.service.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
				t.Fatalf("the service after SIGTERM: %v\n%s", err, g.service.Out)
			}
			g.startService()
		case w[0] == "curl":
			args := make([]string, 0, len(w)+3)
			for _, a := range w[1:] {
				a = regexp.MustCompile(`\$\(sudo cat /etc/cairn/http-token\)`).ReplaceAllLiteralString(a, token())
				args = append(args, strings.ReplaceAll(a, "GATEWAY", httpGateway))
			}
			if code, body := g.curl(curl, args...); code != "200" || !strings.Contains(body, `"ingest"`) {
				t.Fatalf("%s: HTTP %s, want 200 and the status:\n%s", strings.Join(w, " "), code, body)
			}
		default:
			g.do(w)
		}
	}
	// On the board, as root, cairn status reads the token through the
	// configuration (the page says so in its text).
	out, err := g.chroot(ids{0, 0}, "cairn", "status", "-config", "/etc/cairn/cairn.yaml")
	if err != nil || !strings.Contains(out, "1 reading in 1 series") {
		t.Errorf("sudo cairn status -config /etc/cairn/cairn.yaml: %v, want the status with the reading:\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(g.root, "etc/cairn/http-token"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != g.cairn.uid || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file: owner %d, mode %04o; want the cairn user's (%d), 0600", st.Uid, fi.Mode().Perm(), g.cairn.uid)
	}

	// From the network: nothing without the token, a limit on guesses.
	url := "http://" + httpGateway + ":8080"
	if code, body := g.curl(curl, url+"/v1/status"); code != "401" {
		t.Errorf("GET /v1/status without the token from %s: HTTP %s, want 401:\n%s", httpGateway, code, body)
	}
	if code, body := g.curl(curl, url+"/healthz"); code != "200" {
		t.Errorf("GET /healthz without the token: HTTP %s, want 200:\n%s", code, body)
	}
	codes := ""
	for range 12 {
		code, _ := g.curl(curl, "-H", "Authorization: Bearer not-"+token(), url+"/v1/status")
		codes += code + " "
	}
	if !strings.HasPrefix(codes, strings.Repeat("401 ", 10)) || !strings.HasSuffix(codes, "429 ") {
		t.Errorf("12 wrong tokens from one address: %s; want 401 ten times, then 429", codes)
	}
}

// curl runs curl in the namespace with args, and returns the HTTP status
// code and the body.
func (g *piGuide) curl(curl string, args ...string) (code, body string) {
	name, nargs := g.ns.Command(curl, append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...)
	out, err := exec.Command(name, nargs...).CombinedOutput()
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	if err != nil || i < 0 {
		return "", string(out) + " (" + errString(err) + ")"
	}
	return s[i+1:], s[:i]
}

func errString(err error) string {
	if err == nil {
		return "no status code"
	}
	return err.Error()
}

// busybox copies the static busybox into root as /bin/busybox with the
// applets named linked to it, and makes /dev/urandom there.
func busybox(t *testing.T, root string, applets ...string) {
	t.Helper()
	bb := need(t, "busybox", "busybox-static")
	dst := filepath.Join(root, "bin/busybox")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "cp", bb, dst)
	if out, err := exec.Command("chroot", root, "/bin/busybox", "true").CombinedOutput(); err != nil {
		t.Fatalf("%s does not run in a root without a C library (is it busybox-static's?): %v\n%s", bb, err, out)
	}
	for _, a := range applets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(root, "dev/urandom"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 9))); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
}

// httpStep is a step of the HTTP guide: a shell line's words, or a YAML
// block to merge into the configuration.
type httpStep struct {
	words []string
	yaml  []byte
}

// httpGuideSteps reads the steps of httpGuideSection: its shell lines and
// YAML blocks, in order, indented as list items are, up to httpGuideEnd.
func httpGuideSteps(t *testing.T, path string) []httpStep {
	t.Helper()
	doc := string(readFile(t, path))
	i := strings.Index(doc, "\n"+httpGuideSection+"\n")
	j := strings.Index(doc, "\n"+httpGuideEnd+"\n")
	if i < 0 || j < i {
		t.Fatalf("%s has no section %q ending at %q", path, httpGuideSection, httpGuideEnd)
	}
	var steps []httpStep
	var indent, block string
	var yamlBlock []byte
	sc := bufio.NewScanner(strings.NewReader(doc[i:j]))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case block == "" && strings.HasPrefix(trimmed, "```"):
			block = strings.TrimPrefix(trimmed, "```")
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case block != "" && trimmed == "```":
			if block == "yaml" {
				steps = append(steps, httpStep{yaml: yamlBlock})
				yamlBlock = nil
			}
			block = ""
		case block == "sh" && trimmed != "":
			words, err := shellWords(trimmed)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			steps = append(steps, httpStep{words: words})
		case block == "yaml":
			yamlBlock = append(yamlBlock, strings.TrimPrefix(line, indent)+"\n"...)
		}
	}
	if len(steps) == 0 {
		t.Fatalf("%s, %s: no steps", path, httpGuideSection)
	}
	return steps
}
