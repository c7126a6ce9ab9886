package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// refusingWriter stores the first reading of each batch and refuses the
// rest as new series over the device's limit.
type refusingWriter struct{}

func (refusingWriter) Forget(string) {}

func (refusingWriter) SubmitFrom(_ context.Context, _ string, rs []buffer.Reading, done func(buffer.Result)) error {
	res := buffer.Result{Stored: min(len(rs), 1)}
	if len(rs) > 1 {
		res.Refused = len(rs) - 1
		res.Refusal = &buffer.SeriesRefusal{Device: rs[1].Device, Metric: rs[1].Metric, PerDevice: true, Series: 1}
	}
	done(res)
	return nil
}

// A message some of whose readings the store refused is settled (its
// other readings are stored), and counted under too_many_series with an
// example that says which limit refused which metric.
func TestIngester_TooManySeries(t *testing.T) {
	p, err := ParsePattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(refusingWriter{}, IngesterOptions{Routes: []Route{{Pattern: p, Route: payload.Route{Format: payload.FormatJSON}}}, Logger: slog.New(slog.DiscardHandler)})
	settled := errors.New("done not called")
	in.Ingest(context.Background(), "sensors/d1/telemetry", []byte(`{"a":1,"b":2,"c":3}`), time.Now(), func(err error) { settled = err })
	if settled != nil {
		t.Fatalf("settled with %v, want nil", settled)
	}
	st := in.Stats()
	if st.Stored != 1 || st.Refused != 2 || st.ByReason[ReasonTooManySeries] != 1 || st.Rejected != 1 {
		t.Errorf("got stored %d, refused %d, rejected %d %v; want 1, 2, 1 too_many_series", st.Stored, st.Refused, st.Rejected, st.ByReason)
	}
	want := `too_many_series: device "d1" has 1 series (store.max_series_per_device); metric "b" refused, and 1 more readings of the message`
	if len(st.Examples) != 1 || st.Examples[0].Detail != want || st.Examples[0].Reason != ReasonTooManySeries {
		t.Errorf("examples: got %+v, want one with detail %q", st.Examples, want)
	}
}

// A text field that cannot be a reading's text is left out of a message
// whose other readings are stored: each is counted under its own reason
// (text_too_long, invalid_text), with an example, and the message is
// settled, not rejected.
func TestIngester_TextsLeftOut(t *testing.T) {
	st, w := testkit.StartWriter(t, buffer.Options{}, buffer.WriterOptions{})
	p, err := ParsePattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(w, IngesterOptions{Routes: []Route{{Pattern: p, Route: payload.Route{Format: payload.FormatJSON}}}, Logger: slog.New(slog.DiscardHandler)})
	long := strings.Repeat("x", 65)
	msg := `{"ts":1795341600,"t":21.5,"note":"` + long + `","label":"` + long + `","mode":"a\u0001b"}`
	settled := make(chan error, 1)
	in.Ingest(context.Background(), "sensors/d1/telemetry", []byte(msg), time.Now(), func(err error) { settled <- err })
	if err := <-settled; err != nil {
		t.Fatalf("settled with %v, want nil", err)
	}
	stats := in.Stats()
	if stats.Stored != 1 || stats.ByReason[payload.ReasonTextTooLong] != 2 || stats.ByReason[payload.ReasonInvalidText] != 1 || stats.Ignored != 0 {
		t.Errorf("stored %d, ignored %d, by reason %v; want 1, 0, text_too_long 2 and invalid_text 1", stats.Stored, stats.Ignored, stats.ByReason)
	}
	reasons := map[string]string{}
	for _, ex := range stats.Examples {
		reasons[ex.Reason] = ex.Detail
	}
	if len(stats.Examples) != 2 || !strings.Contains(reasons[payload.ReasonTextTooLong], `metric "note": text of 65 bytes, limit 64`) ||
		!strings.Contains(reasons[payload.ReasonInvalidText], `metric "mode"`) {
		t.Errorf("examples %+v, want one of each reason naming the first field", stats.Examples)
	}
	got, err := st.Readings(buffer.Query{Device: "d1", Metric: "t", From: math.MinInt64, To: math.MaxInt64, Limit: 10})
	if err != nil || len(got) != 1 || got[0].Value != 21.5 || got[0].TS != 1795341600*int64(time.Second) {
		t.Errorf("stored readings of t: %+v, %v; want 21.5 at 1795341600", got, err)
	}
}

// TestDecodeState_KeepSharesNothing: the readings kept for one message
// share a slab with the next messages' but never their elements, even
// when appended to, and a message larger than a slab gets its own.
func TestDecodeState_KeepSharesNothing(t *testing.T) {
	var st decodeState
	msg := func(n int, name string) []buffer.Reading {
		rs := make([]buffer.Reading, n)
		for i := range rs {
			rs[i] = buffer.Reading{Device: "d", Metric: name, Value: float64(i)}
		}
		return rs
	}
	first := st.keep(msg(2, "a"))
	second := st.keep(msg(3, "b"))
	if cap(first) != 2 || cap(second) != 3 {
		t.Fatalf("capacities %d and %d, want 2 and 3", cap(first), cap(second))
	}
	first = append(first, buffer.Reading{Metric: "x"}) // must move, not overwrite second[0]
	if second[0].Metric != "b" {
		t.Fatalf("appending to the first message's readings changed the second's: %+v", second[0])
	}
	if got := st.keep(nil); got != nil {
		t.Errorf("keep(nil) = %v, want nil", got)
	}
	big := st.keep(msg(readingSlab+5, "c"))
	if len(big) != readingSlab+5 || big[readingSlab+4].Value != float64(readingSlab+4) {
		t.Fatalf("a message of %d readings kept as %d", readingSlab+5, len(big))
	}
	after := st.keep(msg(1, "e"))
	if &after[0] == &big[0] || after[0].Metric != "e" || big[0].Metric != "c" {
		t.Errorf("the message after a large one overlaps it")
	}
}
