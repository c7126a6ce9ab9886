package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"
)

// Binary is a Go command that tests run as a process, built once, on first
// use, into a temporary directory. A package's TestMain calls Remove.
type Binary struct {
	Pkg   string   // the package: an import path, or a directory such as "."
	Flags []string // more go build flags, such as "-tags", "testclock"

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the command the first time it is called and returns its
// path. It fails the test if the build failed, then and at every later
// call.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(b.build)
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (b *Binary) build() {
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.err = fmt.Errorf("the go command is needed to build %s: %w", b.Pkg, err)
		return
	}
	if b.dir, err = os.MkdirTemp("", "cairn-test-bin-"); err != nil {
		b.err = err
		return
	}
	b.path = filepath.Join(b.dir, filepath.Base(b.Pkg))
	if b.Pkg == "." {
		wd, err := os.Getwd()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(b.dir, filepath.Base(wd))
	}
	args := append([]string{"build", "-o", b.path}, b.Flags...)
	if out, err := exec.Command(gobin, append(args, b.Pkg)...).CombinedOutput(); err != nil {
		b.err = fmt.Errorf("go build %s: %v\n%s", b.Pkg, err, out)
	}
}

// Remove removes the built command, if any; it reports a failure on
// stderr, as TestMain has no test to fail.
func (b *Binary) Remove() {
	if b.dir == "" {
		return
	}
	if err := os.RemoveAll(b.dir); err != nil {
		fmt.Fprintln(os.Stderr, "remove test binary:", err)
	}
}

// RaceEnabled reports whether the running test binary was built with the
// race detector.
func RaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}
