package encoding

import (
	"bytes"
	"testing"
)

// runKV returns the key and value of a run of samples of series d m.
func runKV(t testing.TB, run []Sample) (k, v []byte) {
	t.Helper()
	k = AppendPointKey(nil, Reading{Device: "d", Metric: "m", TS: run[0].TS, Value: run[0].Value})
	v, err := AppendRun(nil, run)
	if err != nil {
		t.Fatal(err)
	}
	return k, v
}

func TestRun_OneSampleIsItsKey(t *testing.T) {
	k, v := runKV(t, []Sample{{TS: 1e18, Value: 21.5}})
	if len(v) != 0 {
		t.Errorf("a run of one sample has a %d-byte value, want none", len(v))
	}
	got, err := DecodeRun(nil, ParsePointTail(k), v)
	if err != nil || len(got) != 1 || !got[0].Same(Sample{TS: 1e18, Value: 21.5}) {
		t.Errorf("DecodeRun: got %v, %v", got, err)
	}
}

func TestDecodeRun_FirstMustBeTheKeys(t *testing.T) {
	_, v := runKV(t, []Sample{{TS: 1, Value: 1}, {TS: 2, Value: 2}})
	dst := []Sample{{TS: 9, Value: 9}}
	got, err := DecodeRun(dst, Sample{TS: 1, Value: 2}, v)
	if err == nil || len(got) != 1 {
		t.Errorf("DecodeRun under another key: got %v, %v; want dst unchanged and an error", got, err)
	}
}

// FuzzDecodeRun: decoding any key and value returns samples or an error,
// never panics; what it returns starts with the key's sample and encodes
// again to a run that decodes to the same samples.
func FuzzDecodeRun(f *testing.F) {
	for _, run := range [][]Sample{
		{{TS: 1e18, Value: 1}},
		{{TS: 1e18, Value: 1}, {TS: 1e18, Value: 2}, {TS: 1e18 + 5e9, Value: -0.5}},
	} {
		k, v := runKV(f, run)
		f.Add(k, v)
	}
	f.Add([]byte("p\x00\x00"), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		r, err := ParsePointKey(k)
		if err != nil {
			return
		}
		first := Sample{TS: r.TS, Value: r.Value}
		run, err := DecodeRun(nil, first, v)
		if err != nil {
			return
		}
		if len(run) == 0 || !run[0].Same(first) {
			t.Fatalf("run %v does not start with its key's sample %+v", run, first)
		}
		re, err := AppendRun(nil, run)
		if err != nil {
			t.Fatalf("decodes, but does not encode: %v", err)
		}
		again, err := DecodeRun(nil, first, re)
		if err != nil {
			t.Fatalf("re-encoded run: %v", err)
		}
		if d := sampleDiff(again, run); d != "" {
			t.Fatalf("re-encoded run: %s", d)
		}
	})
}

// FuzzRunRoundTrip: a run of any sorted samples decodes under its key to
// the same samples, bit for bit.
func FuzzRunRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x02\x01\x04\x06\x03\x02"))
	f.Add([]byte("\x01\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzSamples(data)
		if len(s) == 0 {
			return
		}
		k, v := runKV(t, s)
		if !bytes.HasPrefix(k, AppendSeriesPrefix(nil, "d", "m")) {
			t.Fatalf("key %x outside its series", k)
		}
		got, err := DecodeRun(nil, ParsePointTail(k), v)
		if err != nil {
			t.Fatalf("DecodeRun: %v", err)
		}
		if d := sampleDiff(got, s); d != "" {
			t.Fatalf("round trip: %s", d)
		}
	})
}
