package gateway

import (
	"context"
	"errors"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
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
