package testkit

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Lines is an io.Writer that keeps what a process or an in-process daemon
// writes, as lines, and lets tests wait for one. It is safe for
// concurrent use.
type Lines struct {
	mu      sync.Mutex // guards partial, lines and changed
	partial []byte
	lines   []string
	changed chan struct{} // closed and replaced when a line is complete
}

// NewLines returns an empty Lines.
func NewLines() *Lines { return &Lines{changed: make(chan struct{})} }

func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		added = true
	}
	if added {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

// String returns everything written so far.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + "\n" + string(l.partial)
}

// Matching returns the complete lines that contain substr.
func (l *Lines) Matching(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// WaitLines waits until n lines contain substr and returns them. It gives
// up when quit is closed (the writer is gone) or after timeout.
func (l *Lines) WaitLines(substr string, n int, quit <-chan struct{}, timeout time.Duration) ([]string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if got := l.Matching(substr); len(got) >= n {
			return got, nil
		}
		select {
		case <-changed:
		case <-quit:
			if got := l.Matching(substr); len(got) >= n { // written just before the exit
				return got, nil
			}
			return nil, fmt.Errorf("exited before writing %d lines with %q", n, substr)
		case <-timer.C:
			return nil, fmt.Errorf("no %d lines with %q after %s", n, substr, timeout)
		}
	}
}

// WaitLine waits for a line that contains substr and returns the first.
func (l *Lines) WaitLine(substr string, quit <-chan struct{}, timeout time.Duration) (string, error) {
	got, err := l.WaitLines(substr, 1, quit, timeout)
	if err != nil {
		return "", err
	}
	return got[0], nil
}
