package uplink

import (
	"testing"
	"time"
)

// TestStatus_Failing: the upstream is failing while its last error came
// after its last success, or it never had one; an error a later success
// put behind it is past.
func TestStatus_Failing(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	before, after := t0.Add(-time.Minute), t0.Add(time.Minute)
	for _, tc := range []struct {
		name string
		st   Status
		want bool
	}{
		{"never failed", Status{LastSuccess: &t0}, false},
		{"failed, never succeeded", Status{LastError: "503", LastErrorAt: &t0}, true},
		{"failed after a success", Status{LastError: "503", LastErrorAt: &t0, LastSuccess: &before}, true},
		{"succeeded after the failure", Status{LastError: "503", LastErrorAt: &t0, LastSuccess: &after}, false},
		{"an error without its time", Status{LastError: "503"}, false},
	} {
		if got := tc.st.Failing(); got != tc.want {
			t.Errorf("%s: Failing() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
