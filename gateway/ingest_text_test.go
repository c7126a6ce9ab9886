package gateway

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/payload"
)

// realWriter runs a Writer of a store in a temporary directory until the
// test ends.
func realWriter(t *testing.T, opts buffer.WriterOptions) (*buffer.Store, *buffer.Writer) {
	t.Helper()
	s, err := buffer.Open(buffer.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := buffer.NewWriter(s, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return s, w
}

func submitWait(t *testing.T, w *buffer.Writer, rs ...buffer.Reading) buffer.Result {
	t.Helper()
	ch := make(chan buffer.Result, 1)
	if err := w.Submit(context.Background(), rs, func(r buffer.Result) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	return <-ch
}

// A number into a text series is refused by the store and counted under
// wrong_kind, with an example naming the series and both kinds; the
// message's other readings are stored, and it is settled. A new text over
// the limit is counted under too_many_states, naming the bound and its key.
func TestIngester_WrongKindAndTooManyStates(t *testing.T) {
	s, w := realWriter(t, buffer.WriterOptions{MaxStates: 1})
	now := time.Now()
	if res := submitWait(t, w, buffer.Reading{Device: "d1", Metric: "a", TS: now.UnixNano() - 1e9, Text: "on"}); res.Stored != 1 {
		t.Fatalf("text reading: %+v", res)
	}
	p, err := ParsePattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(w, IngesterOptions{Routes: []Route{{Pattern: p, Route: payload.Route{Format: payload.FormatJSON}}}, Logger: slog.New(slog.DiscardHandler)})
	settled := make(chan error, 1)
	in.Ingest(context.Background(), "sensors/d1/telemetry", []byte(`{"a":1,"b":2}`), now, func(err error) { settled <- err })
	if err := <-settled; err != nil {
		t.Fatalf("settled with %v, want nil", err)
	}
	st := in.Stats()
	if st.Stored != 1 || st.WrongKind != 1 || st.ByReason[ReasonWrongKind] != 1 || st.Rejected != 1 {
		t.Errorf("got stored %d, wrong kind %d, rejected %d %v; want 1, 1, 1 wrong_kind", st.Stored, st.WrongKind, st.Rejected, st.ByReason)
	}
	want := `wrong_kind: device "d1" metric "a" is a text series; a number reading refused`
	if len(st.Examples) != 1 || st.Examples[0].Detail != want || st.Examples[0].Reason != ReasonWrongKind {
		t.Errorf("examples: got %+v, want one with detail %q", st.Examples, want)
	}
	if got, err := s.Readings(buffer.Query{Device: "d1", From: 0, To: now.UnixNano() + 1e9, Limit: 10}); err != nil || len(got) != 2 || got[0].Text != "on" || got[1].Metric != "b" {
		t.Errorf("stored: %+v, %v; want the text of a and the number of b", got, err)
	}

	// Texts do not come through a decoder yet: the store's own result of
	// two new texts over a limit of one, as the ingester reports it.
	res := submitWait(t, w, buffer.Reading{Device: "d1", Metric: "a", TS: now.UnixNano(), Text: "off"},
		buffer.Reading{Device: "d1", Metric: "a", TS: now.UnixNano() + 1, Text: "auto"})
	if res.TooManyStates != 2 || res.StatesRefusal == nil {
		t.Fatalf("result %+v, want 2 refused for too many states", res)
	}
	in.refusedTexts("sensors/d1/telemetry", []byte(`{"a":"off"}`), now, res)
	st = in.Stats()
	want = `too_many_states: device "d1" metric "a" has 1 texts (store.max_states_per_series); text "off" refused, and 1 more readings of the message`
	if st.TooManyStates != 2 || st.ByReason[ReasonTooManyStates] != 1 || st.Examples[0].Detail != want {
		t.Errorf("too many states: %d readings, %v, newest example %+v; want 2, 1, %q", st.TooManyStates, st.ByReason, st.Examples[0], want)
	}
}
