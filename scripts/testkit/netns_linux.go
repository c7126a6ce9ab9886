package testkit

import (
	"crypto/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Netns is a network namespace of a test's own with nothing but a
// loopback interface, up: programs run in it may listen on fixed ports
// (cairn's defaults, 127.0.0.1:8080 and 1883, or 0.0.0.0) without meeting
// anything else on the machine, and reach nothing beyond it.
type Netns struct {
	Name string // its name for ip netns
}

// NewNetns makes a network namespace that is deleted when the test ends.
// It needs root and ip (iproute2), and fails the test without them.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test makes a network namespace and must run as root (euid %d)", os.Geteuid())
	}
	n := &Netns{Name: "cairn-test-" + strings.ToLower(rand.Text()[:12])}
	ipCmd(t, "netns", "add", n.Name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", n.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v\n%s", n.Name, err, out)
		}
	})
	ipCmd(t, "-n", n.Name, "link", "set", "lo", "up")
	return n
}

// Command returns the name and arguments that run the program name with
// args in the namespace (through ip netns exec), for exec.Command or
// StartProcess.
func (n *Netns) Command(name string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.Name, name}, args...)
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
