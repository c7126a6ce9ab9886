package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/aggregate"
)

func TestPointKey_SortsByTime(t *testing.T) {
	ts := []int64{math.MinInt64, -1e18, -1, 0, 1, 1e9, 1763800000123456789, math.MaxInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ts = append(ts, rng.Int64()-rng.Int64())
	}
	keys := make([][]byte, len(ts))
	for i, v := range ts {
		keys[i] = AppendPointKey(nil, Reading{Device: "dev", Metric: "t", TS: v, Value: rng.NormFloat64()})
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	sorted := append([]int64(nil), ts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for i, k := range keys {
		r, err := ParsePointKey(k)
		if err != nil {
			t.Fatalf("ParsePointKey(%x): %v", k, err)
		}
		if r.TS != sorted[i] {
			t.Fatalf("key %d: got ts %d, want %d (keys must sort like timestamps)", i, r.TS, sorted[i])
		}
	}
}

func TestPointKey_SeriesArePartitions(t *testing.T) {
	// Every key of device "a" sorts before every key of device "a.b" and
	// "ab": the separator is the smallest byte.
	a := AppendPointKey(nil, Reading{Device: "a", Metric: "zzz", TS: math.MaxInt64, Value: math.Inf(1)})
	for _, dev := range []string{"a.b", "ab", "a-"} {
		b := AppendPointKey(nil, Reading{Device: dev, Metric: "a", TS: math.MinInt64})
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("key of device a sorts after key of device %q", dev)
		}
	}
	if p := AppendSeriesPrefix(nil, "a", "t"); !bytes.HasPrefix(AppendPointKey(nil, Reading{Device: "a", Metric: "t"}), p) {
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
		got, err := ParsePointKey(AppendPointKey(nil, want))
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
		if _, err := ParsePointKey(k); err == nil {
			t.Errorf("ParsePointKey(%q): got nil error", k)
		}
	}
}

func FuzzParsePointKey(f *testing.F) {
	f.Add(AppendPointKey(nil, Reading{Device: "d", Metric: "m", TS: 1, Value: 2}))
	f.Add([]byte("p\x00\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		r, err := ParsePointKey(k)
		if err != nil {
			return
		}
		// Whatever parses must encode back to the same key.
		if got := AppendPointKey(nil, r); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %+v → %x", k, r, got)
		}
	})
}

func TestUnitKey_RoundTrip(t *testing.T) {
	for _, s := range [][2]string{{"d", "m"}, {"kitchen/door", "température ambiante"}, {"a b", "c=d,e"}} {
		k := AppendUnitKey(nil, s[0], s[1])
		device, metric, err := ParseUnitKey(k)
		if err != nil {
			t.Fatalf("parse %q: %v", k, err)
		}
		if device != s[0] || metric != s[1] {
			t.Errorf("got %q %q, want %q %q", device, metric, s[0], s[1])
		}
	}
	// The unit key of "a" "b" is not a prefix of "a" "bc"'s.
	if a, b := AppendUnitKey(nil, "a", "b"), AppendUnitKey(nil, "a", "bc"); bytes.HasPrefix(b, a) {
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
		if _, _, err := ParseUnitKey(k); err == nil {
			t.Errorf("ParseUnitKey(%q): got nil error", k)
		}
	}
}

func TestHeardKey_RoundTrip(t *testing.T) {
	for _, d := range []string{"d", "kitchen/door", "a b"} {
		k := AppendHeardKey(nil, d)
		got, err := ParseHeardKey(k)
		if err != nil || got != d {
			t.Errorf("ParseHeardKey(%q) = %q, %v; want %q", k, got, err, d)
		}
	}
	for _, k := range [][]byte{nil, []byte("s"), []byte("s\x00"), []byte("sd"), []byte("sd\x00m\x00"), []byte("ud\x00")} {
		if _, err := ParseHeardKey(k); err == nil {
			t.Errorf("ParseHeardKey(%q): got nil error", k)
		}
	}
}

func FuzzParseHeardKey(f *testing.F) {
	f.Add(AppendHeardKey(nil, "d"))
	f.Add([]byte("s\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		device, err := ParseHeardKey(k)
		if err != nil {
			return
		}
		if got := AppendHeardKey(nil, device); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %q → %x", k, device, got)
		}
	})
}

func FuzzParseUnitKey(f *testing.F) {
	f.Add(AppendUnitKey(nil, "d", "m"))
	f.Add([]byte("u\x00\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		device, metric, err := ParseUnitKey(k)
		if err != nil {
			return
		}
		if got := AppendUnitKey(nil, device, metric); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %q %q → %x", k, device, metric, got)
		}
	})
}

func FuzzParseTextKey(f *testing.F) {
	f.Add(AppendTextKey(nil, "d", "m", 0))
	f.Add(AppendTextKey(nil, "kitchen/door", "action", 1<<31))
	f.Add([]byte("t\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, k []byte) {
		device, metric, id, err := ParseTextKey(k)
		if err != nil {
			return
		}
		if got := AppendTextKey(nil, device, metric, id); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %q %q %d → %x", k, device, metric, id, got)
		}
		if !bytes.HasPrefix(k, AppendTextPrefix(nil, device, metric)) {
			t.Fatalf("%x does not start with its series' prefix", k)
		}
	})
}

func TestValidText(t *testing.T) {
	for s, want := range map[string]bool{"heat": true, "Küche an": true, "a\nb": true, "": false,
		"a\x00": false, "\xff": false, strings.Repeat("x", MaxText): true, strings.Repeat("x", MaxText+1): false} {
		if ValidText(s) != want {
			t.Errorf("ValidText(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestBucketKey_SortsByFirstSample(t *testing.T) {
	const day = NanosPerDay
	var keys [][]byte
	for _, ts := range []int64{-day - 1, -1, 0, 1, day - 1, day, 5 * day} {
		keys = append(keys, AppendBucketKey(nil, "d", "m", Sample{ts, 1}))
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Error("bucket keys do not sort like their first timestamps")
	}
	for _, k := range keys {
		dev, metric, first, err := ParseBucketKey(k)
		if err != nil || dev != "d" || metric != "m" {
			t.Errorf("ParseBucketKey(%x): %s %s %+v %v", k, dev, metric, first, err)
		}
	}
}

func FuzzParseBucketKey(f *testing.F) {
	f.Add(AppendBucketKey(nil, "d", "m", Sample{1, 2}))
	f.Add([]byte("b\x00\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		dev, metric, first, err := ParseBucketKey(k)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("error %v does not wrap ErrBadKey", err)
			}
			return
		}
		if got := AppendBucketKey(nil, dev, metric, first); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %s %s %+v → %x", k, dev, metric, first, got)
		}
		if !bytes.HasPrefix(k, AppendBucketPrefix(nil, dev, metric)) {
			t.Fatalf("key %x does not start with its series' bucket prefix", k)
		}
	})
}

func TestStatsKey_RoundTrip(t *testing.T) {
	for _, l := range []aggregate.Level{aggregate.Minute, aggregate.Hour, aggregate.Day} {
		for _, start := range []int64{math.MinInt64, -60e9, 0, 1763769600e9, math.MaxInt64} {
			k := AppendStatsKey(nil, l, "kitchen", "t", start)
			if KeyKind(k[0]) != StatsKind(l) {
				t.Errorf("%v: kind %q, want %q", l, k[0], byte(StatsKind(l)))
			}
			gl, dev, metric, gs, err := ParseStatsKey(k)
			if err != nil || gl != l || dev != "kitchen" || metric != "t" || gs != start {
				t.Errorf("ParseStatsKey(%x): %v %q %q %d %v; want %v kitchen t %d", k, gl, dev, metric, gs, err, l, start)
			}
		}
	}
	if a, b := AppendStatsKey(nil, aggregate.Minute, "d", "m", 60e9), AppendStatsKey(nil, aggregate.Minute, "d", "m", 120e9); bytes.Compare(a, b) >= 0 {
		t.Error("stats keys do not sort like their starts")
	}
}

func FuzzParseStatsKey(f *testing.F) {
	f.Add(AppendStatsKey(nil, aggregate.Minute, "d", "m", 60e9))
	f.Add(AppendStatsKey(nil, aggregate.Day, "kitchen/door", "contact", -86400e9))
	f.Add([]byte("hd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, k []byte) {
		l, dev, metric, start, err := ParseStatsKey(k)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("error %v does not wrap ErrBadKey", err)
			}
			return
		}
		if got := AppendStatsKey(nil, l, dev, metric, start); !bytes.Equal(got, k) {
			t.Fatalf("round trip: %x → %v %q %q %d → %x", k, l, dev, metric, start, got)
		}
	})
}

func FuzzParseSeqKey(f *testing.F) {
	f.Add(AppendJournalKey(nil, 0))
	f.Add(AppendOutboxKey(nil, math.MaxUint64))
	f.Add([]byte("o\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, k []byte) {
		if seq, err := ParseJournalKey(k); err == nil {
			if got := AppendJournalKey(nil, seq); !bytes.Equal(got, k) {
				t.Fatalf("journal round trip: %x → %d → %x", k, seq, got)
			}
		} else if !errors.Is(err, ErrBadKey) {
			t.Fatalf("error %v does not wrap ErrBadKey", err)
		}
		if seq, err := ParseOutboxKey(k); err == nil {
			if got := AppendOutboxKey(nil, seq); !bytes.Equal(got, k) {
				t.Fatalf("outbox round trip: %x → %d → %x", k, seq, got)
			}
		} else if !errors.Is(err, ErrBadKey) {
			t.Fatalf("error %v does not wrap ErrBadKey", err)
		}
	})
}

// FuzzKeyOrder: byte order of point and bucket keys of one series is
// Sample.Less's order, and the day of a timestamp is its day.
func FuzzKeyOrder(f *testing.F) {
	f.Add(int64(0), uint64(0), int64(-1), uint64(1<<63))
	f.Add(int64(math.MinInt64), uint64(0x7ff8000000000001), int64(math.MaxInt64), uint64(0))
	f.Add(int64(NanosPerDay-1), uint64(0), int64(NanosPerDay), uint64(0))
	f.Fuzz(func(t *testing.T, ts1 int64, v1 uint64, ts2 int64, v2 uint64) {
		a := Sample{ts1, math.Float64frombits(v1)}
		b := Sample{ts2, math.Float64frombits(v2)}
		for _, key := range []func(Sample) []byte{
			func(s Sample) []byte {
				return AppendPointKey(nil, Reading{Device: "d", Metric: "m", TS: s.TS, Value: s.Value})
			},
			func(s Sample) []byte { return AppendBucketKey(nil, "d", "m", s) },
		} {
			ka, kb := key(a), key(b)
			if got, want := bytes.Compare(ka, kb) < 0, a.Less(b); got != want {
				t.Fatalf("%+v, %+v: keys sort first %v, Less %v", a, b, got, want)
			}
			if got, want := bytes.Equal(ka, kb), a.Same(b); got != want {
				t.Fatalf("%+v, %+v: keys equal %v, Same %v", a, b, got, want)
			}
		}
		if got := DecodeTS(AppendTS(nil, ts1)); got != ts1 {
			t.Fatalf("DecodeTS(AppendTS(%d)) = %d", ts1, got)
		}
		const nsDay = int64(NanosPerDay)
		d := int64(DayOf(ts1))
		if lo := d * nsDay; d > math.MinInt64/nsDay && (ts1 < lo || ts1-lo >= nsDay) {
			t.Fatalf("DayOf(%d) = %d, which does not hold it", ts1, d)
		}
		if da, db := AppendDay(nil, DayOf(ts1)), AppendDay(nil, DayOf(ts2)); (bytes.Compare(da, db) < 0) != (DayOf(ts1) < DayOf(ts2)) {
			t.Fatalf("days %d, %d do not sort like their keys", DayOf(ts1), DayOf(ts2))
		}
	})
}

func TestMetaKey(t *testing.T) {
	if got := AppendMetaKey(nil, MetaSchema); string(got) != "_schema" {
		t.Errorf("meta key: got %q, want %q", got, "_schema")
	}
	if got := AppendUint64(nil, SchemaVersion); binary.BigEndian.Uint64(got) != SchemaVersion || len(got) != 8 {
		t.Errorf("AppendUint64: got %x", got)
	}
}
