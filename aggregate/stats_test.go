package aggregate

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// eps is the machine epsilon of float64, 2⁻⁵².
const eps = 0x1p-52

func statsOf(vs ...float64) Stats {
	var s Stats
	for _, v := range vs {
		s.Add(v)
	}
	return s
}

// sq returns v·v rounded to float64, unlike a constant expression, which is
// exact.
func sq(v float64) float64 { return v * v }

// near reports whether got is within tol of want; NaN is near NaN only.
func near(got, want, tol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= tol
}

func TestStats_Add(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name                  string
		values                []float64
		want                  Stats
		mean, variance, sigma float64
		// tol bounds the error of mean, variance and sigma, relative to
		// the wanted value or absolute below 1. It is 0 where every
		// intermediate value is exact in float64.
		tol float64
	}{
		{name: "empty", want: Stats{}, mean: nan, variance: nan, sigma: nan},
		{
			name: "single", values: []float64{21.5},
			want: Stats{Count: 1, Sum: 21.5, Min: 21.5, Max: 21.5, SumSqr: 462.25},
			mean: 21.5,
		},
		{
			name: "single inexact", values: []float64{0.1},
			want: Stats{Count: 1, Sum: 0.1, Min: 0.1, Max: 0.1, SumSqr: sq(0.1)},
			mean: 0.1, // and a variance of exactly 0: Sum·(Sum/1) is SumSqr
		},
		{
			name: "zero", values: []float64{0},
			want: Stats{Count: 1},
		},
		{
			name: "textbook", values: []float64{2, 4, 4, 4, 5, 5, 7, 9},
			want: Stats{Count: 8, Sum: 40, Min: 2, Max: 9, SumSqr: 232},
			mean: 5, variance: 4, sigma: 2,
		},
		{
			name: "negative", values: []float64{-1, -2, -3, -4},
			want: Stats{Count: 4, Sum: -10, Min: -4, Max: -1, SumSqr: 30},
			mean: -2.5, variance: 1.25, sigma: math.Sqrt(1.25),
		},
		{
			name: "symmetric", values: []float64{-5, 5},
			want: Stats{Count: 2, Sum: 0, Min: -5, Max: 5, SumSqr: 50},
			mean: 0, variance: 25, sigma: 5,
		},
		{
			name: "min and max found late", values: []float64{3, 1, 4, 1, 5, 9, 2, 6},
			want: Stats{Count: 8, Sum: 31, Min: 1, Max: 9, SumSqr: 173},
			mean: 3.875, variance: 173.0/8 - 3.875*3.875, sigma: math.Sqrt(173.0/8 - 3.875*3.875),
		},
		{
			// Rounding makes SumSqr - Sum²/n about -1.2e-18: clamped to 0.
			name: "rounding below zero", values: []float64{0.1, 0.1, 0.1},
			want: Stats{Count: 3, Sum: 0.30000000000000004, Min: 0.1, Max: 0.1, SumSqr: 0.030000000000000006},
			mean: 0.1, variance: 0, sigma: 0, tol: eps,
		},
		{
			// Large and well conditioned (mean 0): squares near 1e300
			// are rounded once each and summed once, so variance is
			// within a few ulps, 4·ε relative.
			name: "large magnitudes", values: []float64{-1e150, 1e150},
			want: Stats{Count: 2, Sum: 0, Min: -1e150, Max: 1e150, SumSqr: 2 * sq(1e150)},
			mean: 0, variance: 1e300, sigma: 1e150, tol: 4 * eps,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := statsOf(tc.values...)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got, want := got.IsEmpty(), len(tc.values) == 0; got != want {
				t.Errorf("IsEmpty: got %v, want %v", got, want)
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"Mean", got.Mean(), tc.mean},
				{"Variance", got.Variance(), tc.variance},
				{"StdDev", got.StdDev(), tc.sigma},
			} {
				if !near(c.got, c.want, tc.tol*math.Max(1, math.Abs(c.want))) {
					t.Errorf("%s: got %v, want %v (±%g)", c.name, c.got, c.want, tc.tol)
				}
			}
		})
	}
}

// TestStats_VarianceCancellation holds Variance to the error bound its
// documentation gives, a small multiple (here 2) of n·ε·(mean² +
// variance), where cancellation eats some or all of the digits, and checks
// that it never goes negative.
func TestStats_VarianceCancellation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		values    []float64
		mean, vr  float64 // exact
		allDigits bool    // whether the bound leaves no correct digit
	}{
		{"around 1e9", []float64{1e9, 1e9 + 1, 1e9 + 2}, 1e9 + 1, 2.0 / 3, true},
		{"around 1e15", []float64{1e15, 1e15 + 2}, 1e15 + 1, 1, true},
		{"temperatures", []float64{20.1, 19.9, 20.1, 19.9}, 20, 0.01, false},
		{"negative offset", []float64{-1e8 - 3, -1e8 + 3}, -1e8, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := statsOf(tc.values...)
			n := float64(len(tc.values))
			bound := 2 * n * eps * (tc.mean*tc.mean + tc.vr)
			got := s.Variance()
			if got < 0 || math.IsNaN(got) {
				t.Fatalf("got %v, want a variance ≥ 0", got)
			}
			if math.Abs(got-tc.vr) > bound {
				t.Errorf("got %v, want %v within the documented %g", got, tc.vr, bound)
			}
			if allDigits := bound >= tc.vr; allDigits != tc.allDigits {
				t.Errorf("bound %g against variance %g: got all digits lost %v, want %v", bound, tc.vr, allDigits, tc.allDigits)
			}
		})
	}
}

func TestStats_SquareOverflows(t *testing.T) {
	s := statsOf(1e200, 2e200)
	if !math.IsInf(s.SumSqr, 1) {
		t.Fatalf("SumSqr: got %v, want +Inf", s.SumSqr)
	}
	// Documented: +Inf or NaN, never a finite wrong answer.
	if v := s.Variance(); !math.IsInf(v, 1) && !math.IsNaN(v) {
		t.Errorf("Variance: got %v, want +Inf or NaN", v)
	}
}

func TestStats_MergeEmpty(t *testing.T) {
	// A non-empty Stats whose fields would change if the empty one's
	// zero Min and Max were taken into account.
	full := statsOf(3, 7)
	for _, tc := range []struct {
		name     string
		dst, src Stats
		want     Stats
	}{
		{"empty into empty", Stats{}, Stats{}, Stats{}},
		{"empty into full", full, Stats{}, full},
		{"full into empty", Stats{}, full, full},
		{"negative full into empty", Stats{}, statsOf(-2, -1), statsOf(-2, -1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.dst
			got.Merge(tc.src)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestStats_MergeSingletons checks that adding readings and merging the
// Stats of each reading, in the same order, are the same arithmetic.
func TestStats_MergeSingletons(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var added, merged Stats
	for range 1000 {
		v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
		added.Add(v)
		merged.Merge(statsOf(v))
	}
	if added != merged {
		t.Errorf("got %+v merged, want %+v as added", merged, added)
	}
}

// TestStats_MergeOrder merges the Stats of chunks of readings in several
// orders and compares each result with adding every reading in turn.
//
// Count, Min and Max must be equal. Sum and SumSqr are floating-point sums
// of the same n terms in different orders, that is along different
// summation trees. Any such tree's result differs from the exact sum by at
// most (n-1)·u·Σ|vᵢ|, u = ε/2 (Higham, Accuracy and Stability of Numerical
// Algorithms, §4.2), so two of them by at most (n-1)·ε·Σ|vᵢ|; the squares
// add one rounding each, u·Σvᵢ². A tolerance of 2·n·ε·Σ|vᵢ| (Σvᵢ² for
// SumSqr) covers both, the second-order terms and the rounding of the
// bound itself.
func TestStats_MergeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		n := 1 + rng.IntN(500)
		values := make([]float64, n)
		var absSum, sqSum float64
		for i := range values {
			// Mixed signs and magnitudes from 1e-6 to 1e12: the hard case
			// for summation.
			values[i] = rng.NormFloat64()*math.Pow(10, float64(rng.IntN(19)-6)) + 20
			absSum += math.Abs(values[i])
			sqSum += values[i] * values[i]
		}
		want := statsOf(values...)
		chunks := chunk(rng, values)

		var ltr, rtl, shuffled Stats
		for _, c := range chunks {
			ltr.Merge(c)
		}
		for i := len(chunks) - 1; i >= 0; i-- {
			rtl.Merge(chunks[i])
		}
		for _, i := range rng.Perm(len(chunks)) {
			shuffled.Merge(chunks[i])
		}
		for _, got := range []struct {
			order string
			s     Stats
		}{
			{"left to right", ltr},
			{"right to left", rtl},
			{"shuffled", shuffled},
			{"pairwise", mergeTree(chunks)},
		} {
			s := got.s
			if s.Count != want.Count || s.Min != want.Min || s.Max != want.Max {
				t.Fatalf("trial %d, %s: got count %d min %v max %v, want %d %v %v",
					trial, got.order, s.Count, s.Min, s.Max, want.Count, want.Min, want.Max)
			}
			tol := 2 * float64(n) * eps
			if !near(s.Sum, want.Sum, tol*absSum) {
				t.Fatalf("trial %d, %s: got sum %v, want %v (±%g)", trial, got.order, s.Sum, want.Sum, tol*absSum)
			}
			if !near(s.SumSqr, want.SumSqr, tol*sqSum) {
				t.Fatalf("trial %d, %s: got sumsqr %v, want %v (±%g)", trial, got.order, s.SumSqr, want.SumSqr, tol*sqSum)
			}
		}
	}
}

// chunk splits values at random points, empty chunks included, and returns
// the Stats of each chunk.
func chunk(rng *rand.Rand, values []float64) []Stats {
	var out []Stats
	for len(values) > 0 {
		k := rng.IntN(min(len(values), 40) + 1)
		out = append(out, statsOf(values[:k]...))
		values = values[k:]
	}
	return out
}

// mergeTree merges s pairwise, as a balanced tree.
func mergeTree(s []Stats) Stats {
	switch len(s) {
	case 0:
		return Stats{}
	case 1:
		return s[0]
	}
	l := mergeTree(s[:len(s)/2])
	l.Merge(mergeTree(s[len(s)/2:]))
	return l
}

// sameBits reports whether a and b are equal bit for bit, NaN payloads and
// signed zeros included.
func sameBits(a, b Stats) bool {
	bits := math.Float64bits
	return a.Count == b.Count && bits(a.Sum) == bits(b.Sum) && bits(a.Min) == bits(b.Min) &&
		bits(a.Max) == bits(b.Max) && bits(a.SumSqr) == bits(b.SumSqr)
}

func TestStats_AppendDecode(t *testing.T) {
	for _, s := range []Stats{
		{},
		statsOf(21.5),
		statsOf(-3, 1e300, 5e-324, 0.1),
		{Count: math.MaxUint64, Sum: math.Copysign(0, -1), Min: math.Inf(-1), Max: math.Inf(1),
			SumSqr: math.Float64frombits(0x7ff8_0000_dead_beef)},
	} {
		prefix := []byte("key:")
		b := s.Append(prefix)
		if !bytes.Equal(b[:len(prefix)], []byte("key:")) {
			t.Fatalf("Append changed dst: got %q", b[:len(prefix)])
		}
		if got, want := len(b)-len(prefix), 41; got != want {
			t.Errorf("%+v: got %d bytes, want %d", s, got, want)
		}
		got, err := Decode(b[len(prefix):])
		if err != nil {
			t.Fatalf("Decode(Append(%+v)): %v", s, err)
		}
		if !sameBits(got, s) {
			t.Errorf("got %+v, want %+v", got, s)
		}
	}
}

func TestStats_AppendLayout(t *testing.T) {
	got := hex.EncodeToString(statsOf(21.5).Append(nil))
	want := "01" + // version
		"0000000000000001" + // count 1
		"4035800000000000" + // sum 21.5
		"4035800000000000" + // min 21.5
		"4035800000000000" + // max 21.5
		"407ce40000000000" // sumsqr 462.25
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestDecode_Bad(t *testing.T) {
	valid := statsOf(1, 2).Append(nil)
	withVersion := func(v byte, b []byte) []byte {
		b = bytes.Clone(b)
		b[0] = v
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, io.ErrUnexpectedEOF},
		{"empty", []byte{}, io.ErrUnexpectedEOF},
		{"version only", []byte{1}, io.ErrUnexpectedEOF},
		{"one byte short", valid[:40], io.ErrUnexpectedEOF},
		{"one byte long", append(bytes.Clone(valid), 0), ErrBadStats},
		{"twice", append(bytes.Clone(valid), valid...), ErrBadStats},
		{"version 0", withVersion(0, valid), ErrBadStats},
		{"version 2", withVersion(2, valid), ErrBadStats},
		{"unknown version, short", []byte{0xff, 0}, ErrBadStats},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.b)
			if !errors.Is(err, tc.want) {
				t.Errorf("got error %v, want %v", err, tc.want)
			}
			if got != (Stats{}) {
				t.Errorf("got %+v with an error, want the zero Stats", got)
			}
		})
	}
}

// FuzzDecode checks that Decode never panics, fails only with its
// documented errors, and that whatever it accepts is one encoding that
// Append gives back byte for byte. Its seeds are in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrBadStats) {
				t.Fatalf("got error %v, want io.ErrUnexpectedEOF or ErrBadStats", err)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) && len(b) >= 41 {
				t.Fatalf("got %v for %d bytes", err, len(b))
			}
			return
		}
		if re := s.Append(nil); !bytes.Equal(re, b) {
			t.Fatalf("Decode(%x) = %+v, which appends as %x", b, s, re)
		}
	})
}
