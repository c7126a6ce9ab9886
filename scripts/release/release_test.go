package release

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// repo is the repository's top directory, relative to this package.
const repo = "../.."

// need returns the path of a program the test needs, failing if missing.
func need(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
				return filepath.Join(dir, name)
			}
		}
		t.Fatalf("this test needs %s: apt-get install %s (%v)", name, pkg, err)
	}
	return path
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test installs files owned by other users and must run as root (euid %d)", os.Geteuid())
	}
}

// run runs a command and returns its combined output, failing the test on
// error.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestUnit_Verify checks the unit with systemd-analyze verify, its
// ExecStart pointed at a file that exists.
func TestUnit_Verify(t *testing.T) {
	sa := need(t, "systemd-analyze", "systemd")
	unit, err := os.ReadFile(filepath.Join(repo, "systemd/cairn.service"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("\nExecStart=/usr/bin/cairn ")) {
		t.Fatalf("no ExecStart=/usr/bin/cairn line in the unit")
	}
	unit = bytes.Replace(unit, []byte("\nExecStart=/usr/bin/cairn "), []byte("\nExecStart="+exe+" "), 1)
	path := filepath.Join(t.TempDir(), "cairn.service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(t, nil, sa, "verify", path); strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify says:\n%s", out)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for cairn\.service: (\d+\.\d+)`)

// TestUnit_Exposure rates the unit's hardening with systemd-analyze
// security: at most 2.0 ("OK").
func TestUnit_Exposure(t *testing.T) {
	sa := need(t, "systemd-analyze", "systemd")
	out := run(t, []string{"SYSTEMD_COLORS=0"}, sa, "security", "--offline=true", filepath.Join(repo, "systemd/cairn.service"))
	m := exposureRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure in:\n%s", out)
	}
	score, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure %.1f", score)
	if score > 2.0 {
		t.Errorf("exposure %.1f, want at most 2.0:\n%s", score, out)
	}
}

// checkStaticStripped fails unless path is an ELF executable for machine
// that needs no dynamic loader and has no symbol table.
func checkStaticStripped(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s: machine %s, want %s", path, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has %s: not static", path, p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: has a symbol table: not stripped", path)
	}
}

// debFiles returns the files and directories of cairn's .deb: beside
// the program, its unit and configuration, the README and every page of
// docs/ with its images under /usr/share/doc/cairn, as in the repository.
func debFiles(t *testing.T) []string {
	t.Helper()
	files := []string{
		"./etc/", "./etc/cairn/", "./etc/cairn/cairn.yaml",
		"./lib/", "./lib/systemd/", "./lib/systemd/system/", "./lib/systemd/system/cairn.service",
		"./usr/", "./usr/bin/", "./usr/bin/cairn",
		"./usr/lib/", "./usr/lib/sysusers.d/", "./usr/lib/sysusers.d/cairn.conf",
		"./usr/lib/tmpfiles.d/", "./usr/lib/tmpfiles.d/cairn.conf",
		"./usr/share/", "./usr/share/doc/", "./usr/share/doc/cairn/", "./usr/share/doc/cairn/README.md",
		"./usr/share/doc/cairn/docs/", "./usr/share/doc/cairn/docs/img/",
	}
	docs := docFiles(t)
	for _, f := range docs {
		files = append(files, "./usr/share/doc/cairn/"+f)
	}
	if !slices.Contains(docs, "docs/raspberry-pi.md") || !slices.Contains(docs, "docs/img/dashboard.png") {
		t.Fatalf("docs/ has no raspberry-pi.md or img/dashboard.png: %q", docs)
	}
	slices.Sort(files)
	return files
}

// docFiles lists the pages of docs/ and the images in docs/img/, by
// their path in the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"docs/*.md", "docs/img/*.png"} {
		m, err := filepath.Glob(filepath.Join(repo, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, err := filepath.Rel(repo, p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rel)
		}
	}
	return out
}

// debContents lists the paths in a .deb with dpkg-deb --contents.
func debContents(t *testing.T, deb string) []string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(run(t, nil, "dpkg-deb", "--contents", deb)), "\n") {
		f := strings.Fields(line)
		paths = append(paths, f[len(f)-1])
	}
	slices.Sort(paths)
	return paths
}

// TestRelease_BinariesAndDebs builds the release files and checks them;
// the amd64 .deb is installed into a throw-away root.
func TestRelease_BinariesAndDebs(t *testing.T) {
	needRoot(t)
	need(t, "dpkg-deb", "dpkg")
	need(t, "systemd-sysusers", "systemd")
	emu := need(t, "qemu-aarch64", "qemu-user")
	dist := t.TempDir()
	const version = "1.2.3~test"
	run(t, []string{"DIST=" + dist, "VERSION=" + version}, "bash", filepath.Join(repo, "scripts/build-release.sh"))
	commit := strings.TrimSpace(run(t, nil, "git", "rev-parse", "--short=12", "HEAD"))

	for _, arch := range []struct {
		goarch  string
		machine elf.Machine
		exec    []string
	}{{"amd64", elf.EM_X86_64, nil}, {"arm64", elf.EM_AARCH64, []string{emu}}} {
		bin := filepath.Join(dist, "cairn-linux-"+arch.goarch)
		checkStaticStripped(t, bin, arch.machine)
		// The clock that tests move (cmd/cairn/testclock.go) is not in it.
		if b := readFile(t, bin); bytes.Contains(b, []byte("CAIRN_TEST_CLOCK")) {
			t.Errorf("%s honours CAIRN_TEST_CLOCK: built with the testclock tag", bin)
		}
		out := run(t, nil, append(arch.exec, bin, "version")[0], append(arch.exec, bin, "version")[1:]...)
		for _, want := range []string{"cairn " + version + " ", "(commit " + commit, "linux/" + arch.goarch} {
			if !strings.Contains(out, want) {
				t.Errorf("%s version: %q, want %q in it", bin, out, want)
			}
		}
		if regexp.MustCompile(`built \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).FindString(out) == "" {
			t.Errorf("%s version: %q, want a build date", bin, out)
		}

		deb := filepath.Join(dist, "cairn_"+version+"_"+arch.goarch+".deb")
		info := run(t, nil, "dpkg-deb", "--info", deb)
		for _, want := range []string{"Package: cairn", "Version: " + version, "Architecture: " + arch.goarch, "Depends: systemd", " postinst ", " prerm ", " postrm ", " conffiles "} {
			if !strings.Contains(info, want) {
				t.Errorf("%s: dpkg-deb --info has no %q:\n%s", deb, want, info)
			}
		}
		if got, want := debContents(t, deb), debFiles(t); !slices.Equal(got, want) {
			t.Errorf("%s contents:\ngot  %q\nwant %q", deb, got, want)
		}
		if got := strings.TrimSpace(run(t, nil, "dpkg-deb", "--field", deb, "Architecture")); got != arch.goarch {
			t.Errorf("%s: Architecture %q", deb, got)
		}
		// The binary inside is the one built.
		x := t.TempDir()
		run(t, nil, "dpkg-deb", "-x", deb, x)
		same(t, filepath.Join(x, "usr/bin/cairn"), bin)
		same(t, filepath.Join(x, "usr/share/doc/cairn/README.md"), filepath.Join(repo, "README.md"))
		for _, f := range docFiles(t) {
			same(t, filepath.Join(x, "usr/share/doc/cairn", f), filepath.Join(repo, f))
		}
	}
	installDeb(t, filepath.Join(dist, "cairn_"+version+"_amd64.deb"), filepath.Join(dist, "cairn-linux-amd64"))
}

// same fails unless files a and b have the same bytes.
func same(t *testing.T, a, b string) {
	t.Helper()
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(da, db) {
		t.Errorf("%s and %s differ", a, b)
	}
}

// newDpkgRoot returns an empty root file system with a dpkg database.
func newDpkgRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// dpkg runs dpkg on root. Maintainer scripts run on this system with
// DPKG_ROOT set (--force-script-chrootless): the root has no shell to
// chroot into. The root has no systemd package: --force-depends.
func dpkg(t *testing.T, root string, args ...string) string {
	t.Helper()
	return run(t, nil, "dpkg", append([]string{"--root=" + root, "--force-script-chrootless", "--force-depends", "--log=/dev/null"}, args...)...)
}

// installDeb installs deb into a throw-away root, reinstalls it over a
// changed configuration file, removes it and purges it.
func installDeb(t *testing.T, deb, bin string) {
	root := newDpkgRoot(t)
	dpkg(t, root, "--install", deb)
	checkInstalled(t, root, "/usr/bin/cairn", bin)
	for _, f := range append(docFiles(t), "README.md") {
		if fi, err := os.Stat(filepath.Join(root, "usr/share/doc/cairn", f)); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("/usr/share/doc/cairn/%s: %v, want it installed with mode 0644", f, err)
		}
	}
	runPiGuide(t, root, "lib/systemd/system/cairn.service")
	status := run(t, nil, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "--show", "--showformat=${Status}", "cairn")
	if status != "install ok installed" {
		t.Errorf("dpkg-query status %q", status)
	}

	// An upgrade keeps a changed conffile, and the readings.
	conf := filepath.Join(root, "etc/cairn/cairn.yaml")
	changed := append(readFile(t, conf), []byte("# changed here\n")...)
	writeFile(t, conf, changed)
	writeFile(t, filepath.Join(root, "var/lib/cairn/KEEP"), nil)
	dpkg(t, root, "--install", deb)
	if got := readFile(t, conf); !bytes.Equal(got, changed) {
		t.Errorf("reinstall replaced the changed %s", conf)
	}

	dpkg(t, root, "--remove", "cairn")
	for _, gone := range []string{"usr/bin/cairn", "lib/systemd/system/cairn.service"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("after remove, /%s: %v", gone, err)
		}
	}
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("remove must keep the conffile: %v", err)
	}
	dpkg(t, root, "--purge", "cairn")
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("after purge, %s: %v", conf, err)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/cairn/KEEP")); err != nil {
		t.Errorf("purge must keep the readings in /var/lib/cairn: %v", err)
	}
}

// checkInstalled checks a root that cairn was installed into: the binary
// at exe, the unit, the configuration with its data in the state
// directory, the cairn user, and the state directory owned by it.
func checkInstalled(t *testing.T, root, exe, bin string) {
	t.Helper()
	same(t, filepath.Join(root, exe), bin)
	if fi, err := os.Stat(filepath.Join(root, exe)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v %v, want mode 0755", exe, fi.Mode(), err)
	}
	conf := string(readFile(t, filepath.Join(root, "etc/cairn/cairn.yaml")))
	if !strings.Contains(conf, "\ndata_dir: /var/lib/cairn\n") {
		t.Errorf("/etc/cairn/cairn.yaml has no data_dir: /var/lib/cairn:\n%s", conf)
	}
	// The installed configuration is valid.
	run(t, nil, bin, "check-config", "-config", filepath.Join(root, "etc/cairn/cairn.yaml"))

	passwd := string(readFile(t, filepath.Join(root, "etc/passwd")))
	m := regexp.MustCompile(`(?m)^cairn:x:(\d+):(\d+):[^:]*:/var/lib/cairn:/usr/sbin/nologin$`).FindStringSubmatch(passwd)
	if m == nil {
		t.Fatalf("no cairn user in /etc/passwd:\n%s", passwd)
	}
	uid, _ := strconv.Atoi(m[1])
	gid, _ := strconv.Atoi(m[2])
	fi, err := os.Stat(filepath.Join(root, "var/lib/cairn"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid || fi.Mode().Perm() != 0o750 {
		t.Errorf("/var/lib/cairn: owner %d:%d mode %v, want %d:%d 0750", st.Uid, st.Gid, fi.Mode().Perm(), uid, gid)
	}
}

// TestInstallScript_DESTDIR runs scripts/install.sh into a throw-away root
// twice: the second run keeps a changed configuration file.
func TestInstallScript_DESTDIR(t *testing.T) {
	needRoot(t)
	need(t, "systemd-sysusers", "systemd")
	bin := filepath.Join(t.TempDir(), "cairn")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cairn")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	run(t, []string{"DESTDIR=" + root}, "sh", filepath.Join(repo, "scripts/install.sh"), bin)
	checkInstalled(t, root, "/usr/local/bin/cairn", bin)
	unit := string(readFile(t, filepath.Join(root, "etc/systemd/system/cairn.service")))
	if !strings.Contains(unit, "\nExecStart=/usr/local/bin/cairn run -config /etc/cairn/cairn.yaml\n") {
		t.Errorf("installed unit does not start /usr/local/bin/cairn:\n%s", unit)
	}
	for _, f := range []string{"etc/sysusers.d/cairn.conf", "etc/tmpfiles.d/cairn.conf"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Error(err)
		}
	}

	conf := filepath.Join(root, "etc/cairn/cairn.yaml")
	changed := append(readFile(t, conf), []byte("# changed here\n")...)
	writeFile(t, conf, changed)
	out := run(t, []string{"DESTDIR=" + root}, "sh", filepath.Join(repo, "scripts/install.sh"), bin)
	if got := readFile(t, conf); !bytes.Equal(got, changed) {
		t.Errorf("second install replaced the changed %s (said %q)", conf, out)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
