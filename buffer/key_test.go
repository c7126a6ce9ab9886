package buffer

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestPointKey_SortsByTime(t *testing.T) {
	ts := []int64{math.MinInt64, -1e18, -1, 0, 1, 1e9, 1763800000123456789, math.MaxInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ts = append(ts, rng.Int64()-rng.Int64())
	}
	keys := make([][]byte, len(ts))
	for i, v := range ts {
		keys[i] = appendPointKey(nil, Reading{Device: "dev", Metric: "t", TS: v, Value: rng.NormFloat64()})
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	sorted := append([]int64(nil), ts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for i, k := range keys {
		r, err := parsePointKey(k)
		if err != nil {
			t.Fatalf("parsePointKey(%x): %v", k, err)
		}
		if r.TS != sorted[i] {
			t.Fatalf("key %d: got ts %d, want %d (keys must sort like timestamps)", i, r.TS, sorted[i])
		}
	}
}

func TestPointKey_SeriesArePartitions(t *testing.T) {
	// Every key of device "a" sorts before every key of device "a.b" and
	// "ab": the separator is the smallest byte.
	a := appendPointKey(nil, Reading{Device: "a", Metric: "zzz", TS: math.MaxInt64, Value: math.Inf(1)})
	for _, dev := range []string{"a.b", "ab", "a-"} {
		b := appendPointKey(nil, Reading{Device: dev, Metric: "a", TS: math.MinInt64})
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("key of device a sorts after key of device %q", dev)
		}
	}
	if p := appendSeriesPrefix(nil, "a", "t"); !bytes.HasPrefix(appendPointKey(nil, Reading{Device: "a", Metric: "t"}), p) {
		t.Errorf("series prefix %q is not a prefix of its keys", p)
	}
}

func TestPointKey_RoundTrip(t *testing.T) {
	for _, want := range []Reading{
		{Device: "d", Metric: "m", TS: 0, Value: 0},
		{Device: "kitchen-01", Metric: "env.temperature", TS: 1763800000123456789, Value: -21.5},
		{Device: "x", Metric: "y", TS: -5, Value: math.MaxFloat64},
		{Device: "x", Metric: "y", TS: 7, Value: math.Copysign(0, -1)},
	} {
		got, err := parsePointKey(appendPointKey(nil, want))
		if err != nil {
			t.Fatalf("parse %+v: %v", want, err)
		}
		if got != want || math.Signbit(got.Value) != math.Signbit(want.Value) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}

func TestParsePointKey_Bad(t *testing.T) {
	for _, k := range [][]byte{
		nil,
		[]byte("p"),
		[]byte("_readings"),
		append([]byte("pdev\x00"), make([]byte, 16)...),      // no metric
		append([]byte("p\x00m\x00"), make([]byte, 16)...),    // no device
		append([]byte("pdev\x00m\x00"), make([]byte, 15)...), // short tail
	} {
		if _, err := parsePointKey(k); err == nil {
			t.Errorf("parsePointKey(%q): got nil error", k)
		}
	}
}

func FuzzParsePointKey(f *testing.F) {
	f.Add(appendPointKey(nil, Reading{Device: "d", Metric: "m", TS: 1, Value: 2}))
	f.Add([]byte("p\x00\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		r, err := parsePointKey(k)
		if err != nil {
			return
		}
		// Whatever parses must encode back to the same key.
		if got := appendPointKey(nil, r); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %+v → %x", k, r, got)
		}
	})
}

func TestUnitKey_RoundTrip(t *testing.T) {
	for _, s := range [][2]string{{"d", "m"}, {"kitchen/door", "température ambiante"}, {"a b", "c=d,e"}} {
		k := appendUnitKey(nil, s[0], s[1])
		device, metric, err := parseUnitKey(k)
		if err != nil {
			t.Fatalf("parse %q: %v", k, err)
		}
		if device != s[0] || metric != s[1] {
			t.Errorf("got %q %q, want %q %q", device, metric, s[0], s[1])
		}
	}
	// The unit key of "a" "b" is not a prefix of "a" "bc"'s.
	if a, b := appendUnitKey(nil, "a", "b"), appendUnitKey(nil, "a", "bc"); bytes.HasPrefix(b, a) {
		t.Errorf("unit key %q is a prefix of %q", a, b)
	}
}

func TestParseUnitKey_Bad(t *testing.T) {
	for _, k := range [][]byte{
		nil,
		[]byte("u"),
		[]byte("ud\x00m"),          // no final separator
		[]byte("u\x00m\x00"),       // no device
		[]byte("ud\x00\x00"),       // no metric
		[]byte("ud\x00m\x00x\x00"), // a separator in the metric
		[]byte("pd\x00m\x00"),      // another kind
	} {
		if _, _, err := parseUnitKey(k); err == nil {
			t.Errorf("parseUnitKey(%q): got nil error", k)
		}
	}
}

func FuzzParseUnitKey(f *testing.F) {
	f.Add(appendUnitKey(nil, "d", "m"))
	f.Add([]byte("u\x00\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		device, metric, err := parseUnitKey(k)
		if err != nil {
			return
		}
		if got := appendUnitKey(nil, device, metric); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %q %q → %x", k, device, metric, got)
		}
	})
}
