package buffer

import (
	"context"
	"testing"
	"time"
)

// A number read from a state word (Reading.Word) is stored as its word in
// a text series, in the commit that makes the series and in later ones,
// and as its number in a number series; the log and queries hold what
// was stored.
func TestText_WordsTakeTheKindOfTheirSeries(t *testing.T) {
	s, w := testStoreWith(t, "", WriterOptions{})
	upstream(t, s) // a reader of the log
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	at := func(i int) int64 { return base + int64(i)*1e9 }
	word := func(metric string, i int, v float64, w string) Reading {
		return Reading{Device: "d", Metric: metric, TS: at(i), Value: v, Word: w}
	}
	res := write(t, w,
		textOf("d", "mode", at(0), "heat"), word("mode", 1, 0, "off"), // a text series: "off" is its text
		word("relay", 0, 1, "ON"), word("relay", 1, 0, "OFF"), // a number series: 1 and 0
	)
	if res.Stored != 4 || res.WrongKind != 0 {
		t.Fatalf("result %+v; want 4 stored, none refused", res)
	}
	// Committed now: the same in a later commit, and "OFF" is its own text.
	res = write(t, w, word("mode", 2, 0, "OFF"), textOf("d", "mode", at(3), "cool"), word("mode", 4, 0, "off"), word("relay", 2, 1, "ON"))
	if res.Stored != 4 || res.WrongKind != 0 {
		t.Fatalf("later commit: result %+v; want 4 stored, none refused", res)
	}
	// The same reading again is a duplicate, of either kind.
	res = write(t, w, word("mode", 4, 0, "off"), word("relay", 2, 1, "ON"))
	if res.Stored != 0 || res.Duplicates != 2 {
		t.Errorf("again: result %+v; want 2 duplicates", res)
	}
	// A word alone is no text: a number, without its word, is refused by a
	// text series as before.
	if res = write(t, w, Reading{Device: "d", Metric: "mode", TS: at(5), Value: 0}); res.WrongKind != 1 {
		t.Errorf("a number without a word: result %+v; want it refused", res)
	}
	num := func(i int, v float64) Reading { return Reading{Device: "d", Metric: "relay", TS: at(i), Value: v} }
	mode := func(i int, text string) Reading { return textOf("d", "mode", at(i), text) }
	want := []Reading{mode(0, "heat"), num(0, 1), mode(1, "off"), num(1, 0), mode(2, "OFF"), num(2, 1), mode(3, "cool"), mode(4, "off")}
	checkTexts(t, "stored", s, "d", want)
	if got := s.Texts("d", "mode"); len(got) != 4 || got[1] != "off" || got[2] != "OFF" {
		t.Errorf("dictionary %q, want heat off OFF cool", got)
	}
	out := readOutbox(t, s)
	if len(out) != len(want) {
		t.Fatalf("log holds %d readings, want %d", len(out), len(want))
	}
	logged := map[string]bool{}
	for _, r := range out {
		logged[readingKey(r.Reading)] = true
	}
	for _, r := range want {
		if !logged[readingKey(r)] {
			t.Errorf("log lacks %s", readingKey(r))
		}
	}
	// A word that cannot be a text refuses the batch, as a bad text does.
	if err := w.Submit(context.Background(), []Reading{word("relay", 9, 0, "a\x00b")}, func(Result) {}); err == nil {
		t.Error("a word with 0x00: submitted")
	}
}
