package buffer

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Storage benchmarks. Sizes can be raised to the figures of docs/storage.md
// with environment variables; scripts/bench.sh does.

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// sensor generates a realistic series: a slowly varying value (a daily
// wave and a random walk) with noise, rounded to a number of decimals.
type sensor struct {
	rng      *rand.Rand
	base     float64
	walk     float64
	amp      float64
	noise    float64
	decimals float64
}

func newSensor(seed uint64, base, amp, noise float64, decimals int) *sensor {
	return &sensor{rng: rand.New(rand.NewPCG(seed, seed+1)), base: base, amp: amp, noise: noise, decimals: math.Pow10(decimals)}
}

func (s *sensor) at(ts int64) float64 {
	s.walk += s.rng.NormFloat64() * s.noise / 10
	phase := float64(ts%encoding.NanosPerDay) / encoding.NanosPerDay * 2 * math.Pi
	v := s.base + s.walk + s.amp*math.Sin(phase) + s.rng.NormFloat64()*s.noise
	return math.Round(v*s.decimals) / s.decimals
}

// jitteredSecond returns the i-th 1 Hz timestamp after start, in whole
// milliseconds with a few milliseconds of jitter, as sensors send them.
func jitteredSecond(rng *rand.Rand, start int64, i int) int64 {
	return start + int64(i)*1e9 + int64(rng.IntN(11)-5)*1e6
}

// dirBytes returns the bytes allocated to the files under dir, as
// Store.Stats counts them: a file that a compaction removes meanwhile
// counts for nothing.
func dirBytes(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += allocated(info)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// BenchmarkStore_DiskPerReading stores series × 1 Hz × hours of realistic
// readings through the Writer, seals, compacts and reports the bytes on
// disk per reading, sealed and as one reading per key.
func BenchmarkStore_DiskPerReading(b *testing.B) {
	series := envInt("CAIRN_BENCH_SERIES", 100) // a temperature and a humidity per device
	hours := envInt("CAIRN_BENCH_HOURS", 24)
	for _, sealed := range []bool{true, false} {
		name := "sealed"
		if !sealed {
			name = "points"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				d := diskPerReading(b, series, hours, sealed)
				b.ReportMetric(d.total, "bytes/reading")
				b.ReportMetric(d.readings, "readings-bytes/reading")
				b.ReportMetric(d.stats, "stats-bytes/reading")
				b.ReportMetric(d.rate, "readings/s")
			}
		})
	}
}

// diskUse is what diskPerReading measures: bytes on disk per reading in
// all (the data directory), the bytes of the readings' and of the
// aggregates' keys and values alone, and the ingest rate.
type diskUse struct{ total, readings, stats, rate float64 }

func diskPerReading(b *testing.B, series, hours int, sealed bool) diskUse {
	dir := b.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	opts := WriterOptions{noSeal: !sealed, SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour}
	w := NewWriter(s, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	start := int64(1763769600) * 1e9 // a UTC midnight
	sensors := make([]*sensor, series)
	for i := range sensors {
		if i%2 == 0 {
			sensors[i] = newSensor(uint64(i), 21, 3, 0.05, 2)
		} else {
			sensors[i] = newSensor(uint64(i), 50, 8, 0.2, 1)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	const step = 10 // seconds of every series in one commit
	results := make(chan Result, 1)
	batch := make([]Reading, 0, series*step)
	began := time.Now()
	total := 0
	for sec := 0; sec < hours*3600; sec += step {
		batch = batch[:0]
		for i, sn := range sensors {
			dev := "dev" + strconv.Itoa(i/2)
			metric := [2]string{"temperature", "humidity"}[i%2]
			for k := range step {
				ts := jitteredSecond(rng, start, sec+k)
				batch = append(batch, Reading{Device: dev, Metric: metric, TS: ts, Value: sn.at(ts)})
			}
		}
		if err := w.Submit(ctx, slices.Clone(batch), func(r Result) { results <- r }); err != nil {
			b.Fatal(err)
		}
		if r := <-results; r.Err != nil {
			b.Fatal(r.Err)
		}
		total += len(batch)
	}
	rate := float64(total) / time.Since(began).Seconds()
	if sealed {
		if err := w.SealDue(ctx, time.Unix(0, math.MaxInt64)); err != nil {
			b.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	// Compact everything into one level, as time would, so that deleted
	// points and their tombstones are gone.
	if err := s.db.Flatten(2); err != nil {
		b.Fatal(err)
	}
	// Keys and values of a keyspace, as stored, before per-entry
	// overhead.
	share := func(kinds ...encoding.KeyKind) float64 {
		var n int64
		err := s.db.View(func(txn *badger.Txn) error {
			for _, k := range kinds {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(k)}})
				for it.Rewind(); it.Valid(); it.Next() {
					n += int64(len(it.Item().Key())) + it.Item().ValueSize()
				}
				it.Close()
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return float64(n) / float64(total)
	}
	d := diskUse{readings: share(encoding.KindPoint, encoding.KindBucket), stats: share(encoding.KindMinute, encoding.KindHour, encoding.KindDay), rate: rate}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	d.total = float64(dirBytes(b, dir)) / float64(total)
	return d
}

// loadBuckets writes samples of one series straight into sealed buckets of
// n samples, as sealing would, and adds the series to the index.
func loadBuckets(tb testing.TB, s *Store, device, metric string, samples []Sample, n int) {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for len(samples) > 0 {
		end := min(n, len(samples))
		// A bucket never spans two days.
		d := encoding.DayOf(samples[0].TS)
		for i := 1; i < end; i++ {
			if encoding.DayOf(samples[i].TS) != d {
				end = i
				break
			}
		}
		val, err := encoding.AppendBucket(nil, samples[:end])
		if err != nil {
			tb.Fatal(err)
		}
		if err := wb.Set(encoding.AppendBucketKey(nil, device, metric, samples[0]), val); err != nil {
			tb.Fatal(err)
		}
		samples = samples[end:]
	}
	if err := wb.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// p99 returns the 99th percentile of durations, and sorts them.
func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// BenchmarkQuery_Latest50 asks for the latest 50 readings of one device
// among devices × 2 metrics with days of readings, one a minute, sealed.
func BenchmarkQuery_Latest50(b *testing.B) {
	devices := envInt("CAIRN_BENCH_DEVICES", 1000)
	days := envInt("CAIRN_BENCH_DAYS", 30)
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := int64(1763769600) * 1e9
	perSeries := days * 24 * 60
	samples := make([]Sample, perSeries)
	for dev := range devices {
		for m, metric := range []string{"temperature", "humidity"} {
			sn := newSensor(uint64(dev*2+m), 21, 3, 0.05, 2)
			for i := range samples {
				ts := start + int64(i)*60e9
				samples[i] = Sample{TS: ts, Value: sn.at(ts)}
			}
			loadBuckets(b, s, "dev"+strconv.Itoa(dev), metric, samples, 200)
		}
	}
	if err := s.load(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var lat []time.Duration
	for b.Loop() {
		q := Query{Device: "dev" + strconv.Itoa(rng.IntN(devices)), From: math.MinInt64, To: math.MaxInt64, Desc: true, Limit: 50}
		t0 := time.Now()
		rs, err := s.Readings(q)
		lat = append(lat, time.Since(t0))
		if err != nil || len(rs) != 50 {
			b.Fatalf("got %d readings, %v", len(rs), err)
		}
	}
	b.ReportMetric(float64(p99(lat).Microseconds()), "p99-µs")
}

// BenchmarkQuery_DayRange reads one day of one series sampled at 1 Hz,
// sealed, among a day of neighbours.
func BenchmarkQuery_DayRange(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := int64(1763769600) * 1e9
	rng := rand.New(rand.NewPCG(2, 2))
	samples := make([]Sample, 3*86400)
	for m := range 3 {
		sn := newSensor(uint64(m), 21, 3, 0.05, 2)
		for i := range samples {
			ts := jitteredSecond(rng, start, i)
			samples[i] = Sample{TS: ts, Value: sn.at(ts)}
		}
		loadBuckets(b, s, "dev", "m"+strconv.Itoa(m), samples, 200)
	}
	if err := s.load(); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		from := start + encoding.NanosPerDay/2 + rng.Int64N(encoding.NanosPerDay)
		q := Query{Device: "dev", Metric: "m1", From: from, To: from + encoding.NanosPerDay, Limit: MaxQueryLimit}
		t0 := time.Now()
		n := 0
		err := s.Scan(q, func(Reading) bool { n++; return true })
		lat = append(lat, time.Since(t0))
		if err != nil || n < 86000 {
			b.Fatalf("got %d readings, %v", n, err)
		}
	}
	b.ReportMetric(float64(p99(lat).Microseconds()), "p99-µs")
}

// loadYear stores one series with a year of readings at 1 Hz, sealed, and
// its minute, hour and day records, straight into the store.
func loadYear(b *testing.B, s *Store, start int64) {
	const n = 365 * 86400
	sn := newSensor(1, 21, 3, 0.05, 2)
	samples := make([]Sample, 0, 86400)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	cur := map[aggregate.Level]*StatsAt{}
	flush := func(l aggregate.Level) {
		if a := cur[l]; a != nil {
			if err := wb.Set(encoding.AppendStatsKey(nil, l, "dev", "t", a.Start), a.Stats.Append(nil)); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range n {
		ts := start + int64(i)*1e9
		v := sn.at(ts)
		samples = append(samples, Sample{TS: ts, Value: v})
		for _, l := range levels() {
			g := l.Truncate(ts)
			if a := cur[l]; a == nil || a.Start != g {
				flush(l)
				cur[l] = &StatsAt{Start: g}
			}
			cur[l].Stats.Add(v)
		}
		if len(samples) == cap(samples) {
			loadBuckets(b, s, "dev", "t", samples, 200)
			samples = samples[:0]
		}
	}
	for _, l := range levels() {
		flush(l)
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	loadBuckets(b, s, "dev", "t", samples, 200)
	if err := s.load(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStats_Year asks for the stats of one series with a year of
// readings at 1 Hz: of a random 30-day range as one value (the covering
// query), and of the whole year by day.
func BenchmarkStats_Year(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := int64(1735689600) * 1e9 // 2025-01-01
	loadYear(b, s, start)
	rng := rand.New(rand.NewPCG(3, 3))
	b.Run("30days_all", func(b *testing.B) {
		var lat []time.Duration
		var records, readings int
		for b.Loop() {
			from := start + rng.Int64N(330*encoding.NanosPerDay)
			t0 := time.Now()
			st, reads, err := s.StatsCover("dev", "t", from, from+30*encoding.NanosPerDay)
			lat = append(lat, time.Since(t0))
			if err != nil || st.Count < 30*86400-120 {
				b.Fatalf("got %+v, %v", st, err)
			}
			records, readings = max(records, reads.Records), max(readings, reads.Readings)
		}
		b.ReportMetric(float64(p99(lat).Microseconds()), "p99-µs")
		b.ReportMetric(float64(records), "max-records")
		b.ReportMetric(float64(readings), "max-raw-readings")
	})
	b.Run("year_by_day", func(b *testing.B) {
		var lat []time.Duration
		var records int
		for b.Loop() {
			t0 := time.Now()
			days, reads, err := s.StatsByLevel("dev", "t", aggregate.Day, start, start+365*encoding.NanosPerDay)
			lat = append(lat, time.Since(t0))
			if err != nil || len(days) != 365 {
				b.Fatalf("got %d days, %v", len(days), err)
			}
			records = max(records, reads.Records)
		}
		b.ReportMetric(float64(p99(lat).Microseconds()), "p99-µs")
		b.ReportMetric(float64(records), "max-records")
	})
}
