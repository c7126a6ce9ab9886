// cairn's regression test of patches/0003-throttle-finish-keeps-the-first-error.patch:
// it fails on the release.

package y

import (
	"errors"
	"testing"
)

// TestThrottleFinishKeepsAnErrorThatDoTook: an error passed to Done that
// a Do took from the throttle (as a subcompaction that stops at a failed
// Do does) is still what Finish returns.
func TestThrottleFinishKeepsAnErrorThatDoTook(t *testing.T) {
	th := NewThrottle(1)
	if err := th.Do(); err != nil {
		t.Fatal(err)
	}
	want := errors.New("table not written")
	th.Done(want)
	// Do takes a free slot or the error, at random: until it takes the
	// error.
	for i := 0; ; i++ {
		err := th.Do()
		if err != nil {
			if err != want {
				t.Fatalf("Do: %v, want %v", err, want)
			}
			break
		}
		th.Done(nil)
		if i == 1000 {
			t.Fatal("Do never took the error")
		}
	}
	if err := th.Finish(); err != want {
		t.Fatalf("Finish: %v, want %v", err, want)
	}
}
