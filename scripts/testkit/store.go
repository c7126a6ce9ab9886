package testkit

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
)

// StartWriter opens a store with opts (in a new temporary directory when
// opts.Dir is empty) and runs a Writer of it with wopts until the test
// ends; then it stops the Writer and closes the store, and an error of
// either fails the test. A test that must close the store itself, or
// reopen it, opens it on its own.
func StartWriter(t testing.TB, opts buffer.Options, wopts buffer.WriterOptions) (*buffer.Store, *buffer.Writer) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := buffer.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	w := buffer.NewWriter(s, wopts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := errors.Join(<-done, s.Close()); err != nil {
			t.Errorf("store %s: %v", opts.Dir, err)
		}
	})
	return s, w
}
