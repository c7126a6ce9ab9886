package buffer

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// TestWriter_SubmitChecksNames refuses a batch holding a name that could
// break a key, whoever calls Submit, and stores names as real systems
// write them.
func TestWriter_SubmitChecksNames(t *testing.T) {
	s, w := testStore(t, "")
	for _, r := range []Reading{
		{Device: "a\x00b", Metric: "t"},
		{Device: "d", Metric: "t\x00"},
		{Device: "", Metric: "t"},
		{Device: "..", Metric: "t"},
		{Device: "d", Metric: "t\n"},
		{Device: "d", Metric: strings.Repeat("m", encoding.MaxMetricLen+1)},
		{Device: "d", Metric: "\xff"},
	} {
		err := w.Submit(context.Background(), []Reading{{Device: "ok", Metric: "t", TS: 1}, r}, func(Result) { t.Error("done called") })
		if err == nil || !strings.Contains(err.Error(), "reading 1") {
			t.Errorf("Submit(%q, %q) = %v, want an error naming reading 1", r.Device, r.Metric, err)
		}
	}
	names := []Reading{
		{Device: "kitchen/door", Metric: "contact", TS: 1, Value: 1},
		{Device: "Küche Süd", Metric: "Außen temp", TS: 1, Value: 2},
		{Device: "温室 1", Metric: "温度", TS: 1, Value: 3},
	}
	if got := write(t, w, names...); got.Stored != 3 {
		t.Fatalf("write: %+v, want 3 stored", got)
	}
	for _, r := range names {
		got, err := s.Readings(all(r.Device))
		if err != nil || len(got) != 1 || got[0].Metric != r.Metric || got[0].Value != r.Value {
			t.Errorf("readings of %q: %v, %v", r.Device, got, err)
		}
	}
	if s.ReadingCount() != 3 {
		t.Errorf("ReadingCount %d, want 3: the refused batches stored nothing", s.ReadingCount())
	}
}
