package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Process is a program a test runs, with its output, stdout and stderr
// together, kept as Lines.
type Process struct {
	Name string // the program's base name, for messages
	Cmd  *exec.Cmd
	Out  *Lines

	exited chan struct{} // closed when the process has exited
	err    error         // what Wait returned; read after exited
}

// StartProcess starts the program name with args, and env as its whole
// environment (nil: this process's). It fails the test if the program
// does not start. When the test ends the process is killed, if it is
// still running.
func StartProcess(t testing.TB, env []string, name string, args ...string) *Process {
	t.Helper()
	p := &Process{Name: filepath.Base(name), Out: NewLines(), exited: make(chan struct{})}
	p.Cmd = exec.Command(name, args...)
	p.Cmd.Env = env
	p.Cmd.Stdout = p.Out
	p.Cmd.Stderr = p.Out
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.exited)
		p.err = p.Cmd.Wait()
	}()
	t.Cleanup(func() {
		if !p.Running() {
			return
		}
		if err := p.Cmd.Process.Kill(); err != nil {
			t.Errorf("kill %s: %v", p.Name, err)
		}
		<-p.exited
	})
	return p
}

// Exited returns a channel that is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err returns what waiting for the process returned: nil if it exited 0,
// an *exec.ExitError if it exited otherwise. It returns nil while the
// process is running.
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop sends sig and waits until the process has exited, and returns what
// Err returns. If the process is still running after timeout it is sent
// SIGQUIT (a Go program prints every goroutine's stack and exits), and
// killed if it still runs 5 s later; Stop returns an error that says
// so. That error, and one for a signal that could not be sent, is never
// an *exec.ExitError.
func (p *Process) Stop(sig os.Signal, timeout time.Duration) error {
	if err := p.Cmd.Process.Signal(sig); err != nil && p.Running() {
		return fmt.Errorf("signal %s to %s: %w", sig, p.Name, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.err
	case <-timer.C:
		// SIGQUIT first: a Go program prints every goroutine's stack on
		// it, which is what says where it hung.
		_ = p.Cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
			return fmt.Errorf("%s still running %s after %s; ended by SIGQUIT, on which a Go program prints its goroutines' stacks", p.Name, timeout, sig)
		case <-time.After(5 * time.Second):
		}
		if err := p.Cmd.Process.Kill(); err != nil {
			return fmt.Errorf("%s still running %s after %s, and kill: %w", p.Name, timeout, sig, err)
		}
		<-p.exited
		return fmt.Errorf("%s still running %s after %s; killed", p.Name, timeout, sig)
	}
}
