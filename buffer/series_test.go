package buffer

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// readingsOf returns one reading at ts for each metric of device.
func readingsOf(device string, ts int64, metrics ...string) []Reading {
	var rs []Reading
	for i, m := range metrics {
		rs = append(rs, Reading{Device: device, Metric: m, TS: ts, Value: float64(i)})
	}
	return rs
}

// A device at its limit gets no new series; its other readings, the
// readings of its series stored already and other devices' are stored.
func TestWriter_MaxSeriesPerDevice(t *testing.T) {
	s, w := testStoreWith(t, t.TempDir(), WriterOptions{MaxSeriesPerDevice: 3})
	ts := time.Now().UnixNano()
	res := write(t, w, readingsOf("a", ts, "m1", "m2", "m3", "m4", "m5")...)
	if res.Stored != 3 || res.Refused != 2 {
		t.Fatalf("got %d stored, %d refused, want 3 and 2", res.Stored, res.Refused)
	}
	want := &SeriesRefusal{Device: "a", Metric: "m4", PerDevice: true, Series: 3}
	if !reflect.DeepEqual(res.Refusal, want) {
		t.Errorf("refusal: got %+v, want %+v", res.Refusal, want)
	}
	if got, want := res.Refusal.Error(), `device "a" has 3 series (store.max_series_per_device); metric "m4" refused`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	res = write(t, w, append(readingsOf("a", ts+1, "m1", "m6"), readingsOf("b", ts, "m1", "m2")...)...)
	if res.Stored != 3 || res.Refused != 1 || res.Refusal.Metric != "m6" {
		t.Errorf("a's stored series, a new one and b's: got %+v, want 3 stored and m6 refused", res)
	}
	if got := s.SeriesCount(); got != 5 {
		t.Errorf("got %d series, want 5", got)
	}
	if got := w.Stats().Refused; got != 3 {
		t.Errorf("Refused: got %d, want 3", got)
	}
}

// The store's limit counts every device's series, those of the commit
// under way too.
func TestWriter_MaxSeries(t *testing.T) {
	s, w := testStoreWith(t, t.TempDir(), WriterOptions{MaxSeries: 4, MaxSeriesPerDevice: 3})
	ts := time.Now().UnixNano()
	res := write(t, w, append(readingsOf("a", ts, "m1", "m2"), readingsOf("b", ts, "m1", "m2", "m3")...)...)
	if res.Stored != 4 || res.Refused != 1 {
		t.Fatalf("got %d stored, %d refused, want 4 and 1", res.Stored, res.Refused)
	}
	want := &SeriesRefusal{Device: "b", Metric: "m3", Series: 4}
	if !reflect.DeepEqual(res.Refusal, want) {
		t.Errorf("refusal: got %+v, want %+v", res.Refusal, want)
	}
	if got, want := res.Refusal.Error(), `the store has 4 series (store.max_series); device "b" metric "m3" refused`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := s.SeriesCount(); got != 4 {
		t.Errorf("got %d series, want 4", got)
	}
}

// The series loaded at Open count against the limits; those beyond a
// limit lowered since stay, and take readings, but none is added.
func TestWriter_SeriesLimitsAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s, tw := openWriterOpts(t, dir, WriterOptions{})
	ts := time.Now().UnixNano()
	write(t, tw.Writer, append(readingsOf("a", ts, "m1", "m2", "m3"), readingsOf("b", ts, "m1")...)...)
	checkpoint(t, tw.Writer)
	write(t, tw.Writer, readingsOf("a", ts+1, "m4")...) // left in the journal
	tw.stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, tw = openWriterOpts(t, dir, WriterOptions{MaxSeriesPerDevice: 2, MaxSeries: 6})
	defer func() {
		tw.stop()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if got := s.SeriesCount(); got != 5 {
		t.Fatalf("reopened: %d series, want 5", got)
	}
	res := write(t, tw.Writer, append(readingsOf("a", ts+2, "m1", "m4", "m5"), readingsOf("b", ts, "m2", "m3")...)...)
	if res.Stored != 3 || res.Refused != 2 {
		t.Fatalf("got %d stored, %d refused, want 3 and 2", res.Stored, res.Refused)
	}
	if want := (&SeriesRefusal{Device: "a", Metric: "m5", PerDevice: true, Series: 4}); !reflect.DeepEqual(res.Refusal, want) {
		t.Errorf("refusal: got %+v, want %+v", res.Refusal, want)
	}
	// b has 2 series now, and the store 6.
	res = write(t, tw.Writer, readingsOf("c", ts, "m1")...)
	if res.Refused != 1 || res.Refusal.PerDevice || res.Refusal.Series != 6 {
		t.Errorf("a new device over the store's limit: got %+v", res)
	}
}

// Devices pages through the devices by name.
func TestStore_Devices(t *testing.T) {
	s, w := testStore(t, t.TempDir())
	ts := time.Now().UnixNano()
	var rs []Reading
	for _, d := range []string{"d3", "d1", "d2", "d5", "d4"} {
		rs = append(rs, readingsOf(d, ts, "t", "h")...)
	}
	rs = append(rs, Reading{Device: "d1", Metric: "t", TS: ts + 5, Value: 1})
	write(t, w, rs...)
	var got []string
	after, pages := "", 0
	for {
		page, more := s.Devices(after, 2)
		pages++
		for _, d := range page {
			got = append(got, fmt.Sprintf("%s %v %d", d.Name, d.Metrics, d.Last-ts))
		}
		if !more {
			break
		}
		after = page[len(page)-1].Name
	}
	want := []string{"d1 [h t] 5", "d2 [h t] 0", "d3 [h t] 0", "d4 [h t] 0", "d5 [h t] 0"}
	if !reflect.DeepEqual(got, want) || pages != 3 {
		t.Errorf("got %q in %d pages, want %q in 3", got, pages, want)
	}
	if page, more := s.Devices("d5", 2); len(page) != 0 || more {
		t.Errorf("after the last: got %v, %v", page, more)
	}
	if !s.HasDevice("d3") || s.HasDevice("d6") {
		t.Errorf("HasDevice: d3 %v, d6 %v; want true, false", s.HasDevice("d3"), s.HasDevice("d6"))
	}
}
