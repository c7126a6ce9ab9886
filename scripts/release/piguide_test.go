package release

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// piGuideSection is the section of docs/raspberry-pi.md whose commands
// TestPiGuide_LetSensorsIn runs.
const piGuideSection = "## Let sensors in"

// TestPiGuide_LetSensorsIn installs cairn with scripts/install.sh into a
// throw-away root and runs the Pi guide in it (runPiGuide); so does
// TestRelease_BinariesAndDebs with the .deb.
func TestPiGuide_LetSensorsIn(t *testing.T) {
	needRoot(t)
	need(t, "systemd-sysusers", "systemd")
	bin := filepath.Join(t.TempDir(), "cairn")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cairn")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // it runs in a root without a C library
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	run(t, []string{"DESTDIR=" + root}, "sh", filepath.Join(repo, "scripts/install.sh"), bin)
	runPiGuide(t, root, "etc/systemd/system/cairn.service")
}

// runPiGuide runs the commands of the Pi guide's "Let sensors in"
// section, read from docs/raspberry-pi.md, in root, where cairn was
// installed with its unit at unit (chroot), in a network
// namespace of their own: `sudo X` as root, `sudo -u cairn X` as the
// cairn user, `sudoedit` by merging the guide's YAML into the file,
// `systemctl enable --now cairn` by starting the unit's ExecStart as its
// User, `cairn status` as nobody, and mosquitto_pub with GATEWAY the
// loopback address. The service must start, take a publish with the
// password and refuse one without it. A command the test does not know
// fails it, so the guide and the test cannot drift apart.
func runPiGuide(t *testing.T, root, unit string) {
	t.Helper()
	need(t, "chroot", "coreutils")
	need(t, "ip", "iproute2")
	need(t, "mosquitto_pub", "mosquitto-clients")
	steps, config := piGuideSteps(t, filepath.Join(repo, "docs/raspberry-pi.md"))
	if err := os.Chmod(root, 0o755); err != nil { // the cairn user walks it
		t.Fatal(err)
	}
	g := &piGuide{t: t, root: root, unit: unit, ns: testkit.NewNetns(t), config: config, password: "kitchen-Pa55-" + strconv.Itoa(os.Getpid())}
	g.cairn = g.account("cairn")

	for _, step := range steps {
		t.Logf("$ %s", strings.Join(step, " "))
		g.do(step)
	}
	if g.service == nil {
		t.Fatal("the guide never started the service")
	}

	// The reading is there, and the password was needed for it.
	out, err := g.chroot(nobody, "cairn", "status", "-sample", "0")
	if err != nil || !strings.Contains(out, "1 message, 1 reading stored") {
		t.Errorf("cairn status after the publish: %v, want the reading stored:\n%s", err, out)
	}
	if out, err := g.publish("-h", "127.0.0.1", "-u", "kitchen", "-P", "not-"+g.password, "-q", "1", "-t", "sensors/kitchen/telemetry", "-m", "{\"temperature\":1}"); err == nil {
		t.Errorf("mosquitto_pub with a wrong password was let in:\n%s", out)
	}
	if out, err := g.publish("-h", "127.0.0.1", "-q", "1", "-t", "sensors/kitchen/telemetry", "-m", "{\"temperature\":1}"); err == nil {
		t.Errorf("mosquitto_pub without a user was let in:\n%s", out)
	}

	// A password file the service cannot read (root's, 0600: what the
	// guide once made) fails check-config as the service user, with the
	// fix.
	passwd := filepath.Join(root, "etc/cairn/passwd")
	if err := os.Chmod(passwd, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = g.chroot(g.cairn, "cairn", "check-config", "-config", "/etc/cairn/cairn.yaml")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 78 || !strings.Contains(out, "permission denied") || !strings.Contains(out, "chown root:cairn /etc/cairn/passwd; chmod 640 /etc/cairn/passwd") {
		t.Errorf("check-config as cairn with a password file of root's, 0600: %v, want exit 78, permission denied and the fix:\n%s", err, out)
	}

	// Then the HTTP API and the dashboard are opened to the network, as
	// docs/security.md says.
	if err := os.Chmod(passwd, 0o640); err != nil {
		t.Fatal(err)
	}
	runHTTPGuide(g)

	if err := g.service.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("the service after SIGTERM: %v\n%s", err, g.service.Out)
	}
}

// piGuideSteps reads the shell commands (one a line, comments dropped)
// and the one YAML block of the Pi guide's piGuideSection.
func piGuideSteps(t *testing.T, path string) (steps [][]string, config []byte) {
	t.Helper()
	doc := string(readFile(t, path))
	i := strings.Index(doc, "\n"+piGuideSection+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", path, piGuideSection)
	}
	section := doc[i+len(piGuideSection)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var yamls int
	sc := bufio.NewScanner(strings.NewReader(section))
	for block := ""; sc.Scan(); {
		line := sc.Text()
		switch {
		case block == "" && strings.HasPrefix(line, "```"):
			block = strings.TrimPrefix(line, "```")
			if block == "yaml" {
				yamls++
			}
		case line == "```":
			block = ""
		case block == "sh" && strings.TrimSpace(line) != "":
			words, err := shellWords(line)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			steps = append(steps, words)
		case block == "yaml":
			config = append(config, line+"\n"...)
		}
	}
	if len(steps) == 0 || yamls != 1 {
		t.Fatalf("%s, %s: %d commands and %d YAML blocks, want some commands and one block", path, piGuideSection, len(steps), yamls)
	}
	return steps, config
}

// shellWords splits a line of shell into words as sh would for the
// commands of the guide: single and double quotes, and a comment from a
// word that starts with #.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c", c)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// ids are a user's and a group's numbers.
type ids struct{ uid, gid int }

var nobody = ids{65534, 65534}

// rootPath is the PATH of the commands run in the root (sudo's
// secure_path).
const rootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// piGuide runs the guide's commands in a root that cairn was installed
// into.
type piGuide struct {
	t        *testing.T
	root     string
	unit     string // the unit's path in root
	ns       *testkit.Netns
	config   []byte // the guide's YAML
	password string // typed at cairn passwd, and SECRET of mosquitto_pub
	cairn    ids
	service  *testkit.Cairn
}

// do runs one command of the guide.
func (g *piGuide) do(w []string) {
	t := g.t
	t.Helper()
	switch {
	case w[0] == "sudoedit" && len(w) == 2:
		g.edit(w[1])
	case len(w) == 5 && w[0] == "sudo" && w[1] == "systemctl" && slices.Equal(w[2:], []string{"enable", "--now", "cairn"}):
		g.startService()
	case w[0] == "sudo" && len(w) > 3 && w[1] == "-u":
		if out, err := g.chroot(g.account(w[2]), w[3:]...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(w, " "), err, out)
		}
	case w[0] == "sudo" && len(w) > 1:
		out, err := g.chroot(ids{0, 0}, w[1:]...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(w, " "), err, out)
		}
		if slices.Contains(w, "passwd") {
			g.checkPasswordFile(w)
		}
	case w[0] == "cairn":
		if out, err := g.chroot(nobody, w...); err != nil || !strings.Contains(out, "embedded broker 0.0.0.0:1883, listening") {
			t.Fatalf("%s: %v, want the embedded broker listening on all addresses:\n%s", strings.Join(w, " "), err, out)
		}
	case w[0] == "mosquitto_pub":
		args := slices.Clone(w[1:])
		for i, a := range args {
			switch a {
			case "GATEWAY":
				args[i] = "127.0.0.1"
			case "SECRET":
				args[i] = g.password
			}
		}
		if out, err := g.publish(args...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(w, " "), err, out)
		}
	default:
		t.Fatalf("the guide says %q, which this test does not know how to run: teach it", strings.Join(w, " "))
	}
}

// chroot runs a command in the root as who, in the network namespace, with
// the password on its stdin (for cairn passwd), and returns its output.
func (g *piGuide) chroot(who ids, args ...string) (string, error) {
	cargs := []string{}
	if who.uid != 0 {
		cargs = append(cargs, fmt.Sprintf("--userspec=%d:%d", who.uid, who.gid), "--groups=")
	}
	cargs = append(append(cargs, g.root), args...)
	name, nargs := g.ns.Command("chroot", cargs...)
	cmd := exec.Command(name, nargs...)
	cmd.Env = []string{"PATH=" + rootPath}
	cmd.Stdin = strings.NewReader(g.password + "\n")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// publish runs mosquitto_pub in the network namespace.
func (g *piGuide) publish(args ...string) (string, error) {
	name, nargs := g.ns.Command("mosquitto_pub", args...)
	out, err := exec.Command(name, nargs...).CombinedOutput()
	return string(out), err
}

// checkPasswordFile checks that the file of a cairn passwd command is
// root's, with the group cairn and mode 0640.
func (g *piGuide) checkPasswordFile(w []string) {
	t := g.t
	t.Helper()
	i := slices.Index(w, "-file")
	if i < 0 || i+1 >= len(w) {
		t.Fatalf("%q: no -file", strings.Join(w, " "))
	}
	fi, err := os.Stat(filepath.Join(g.root, w[i+1]))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 0 || int(st.Gid) != g.cairn.gid || fi.Mode().Perm() != 0o640 {
		t.Errorf("%s: owner %d:%d, mode %04o; want 0:%d (cairn), 0640", w[i+1], st.Uid, st.Gid, fi.Mode().Perm(), g.cairn.gid)
	}
}

// edit does what the guide's sudoedit asks: the guide's YAML merged into
// the file.
func (g *piGuide) edit(path string) {
	t := g.t
	t.Helper()
	file := filepath.Join(g.root, path)
	var doc, change yaml.Node
	if err := yaml.Unmarshal(readFile(t, file), &doc); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(g.config, &change); err != nil {
		t.Fatalf("the guide's YAML: %v\n%s", err, g.config)
	}
	mergeYAML(doc.Content[0], change.Content[0])
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mergeYAML sets the keys of the mapping src in the mapping dst, mappings
// within merged alike.
func mergeYAML(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		j := 0
		for ; j+1 < len(dst.Content); j += 2 {
			if dst.Content[j].Value == k.Value {
				break
			}
		}
		switch {
		case j+1 >= len(dst.Content):
			dst.Content = append(dst.Content, k, v)
		case v.Kind == yaml.MappingNode && dst.Content[j+1].Kind == yaml.MappingNode:
			mergeYAML(dst.Content[j+1], v)
		default:
			dst.Content[j+1] = v
		}
	}
}

// startService starts what the installed unit's ExecStart says, as its
// User and Group, and waits until cairn has started.
func (g *piGuide) startService() {
	t := g.t
	t.Helper()
	unit := string(readFile(t, filepath.Join(g.root, g.unit)))
	key := func(k string) string {
		m := regexp.MustCompile(`(?m)^` + k + `=(.*)$`).FindStringSubmatch(unit)
		if m == nil {
			t.Fatalf("the unit has no %s=", k)
		}
		return m[1]
	}
	user, group := g.account(key("User")), g.account(key("Group"))
	if user.gid != group.gid {
		t.Fatalf("User=%s and Group=%s have other groups", key("User"), key("Group"))
	}
	args := append([]string{fmt.Sprintf("--userspec=%d:%d", user.uid, user.gid), "--groups=", g.root}, strings.Fields(key("ExecStart"))...)
	name, nargs := g.ns.Command("chroot", args...)
	g.service = testkit.StartCairn(t, []string{"PATH=" + rootPath}, 30*time.Second, name, nargs...)
}

// account returns the ids of a user (or, failing that, a group) of the
// root.
func (g *piGuide) account(name string) ids {
	t := g.t
	t.Helper()
	for _, f := range []string{"etc/passwd", "etc/group"} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `:x:(\d+):(\d*)`).FindStringSubmatch(string(readFile(t, filepath.Join(g.root, f))))
		if m == nil {
			continue
		}
		uid, _ := strconv.Atoi(m[1])
		gid, err := strconv.Atoi(m[2])
		if f == "etc/group" || err != nil {
			gid = uid
		}
		return ids{uid, gid}
	}
	t.Fatalf("no user or group %q in %s", name, g.root)
	return ids{}
}
