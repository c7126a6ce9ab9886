package buffer

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// benchTextSeries stores a reading in each of 100 text series, so that
// BenchmarkWriter_Commit's number readings are written in a store that
// has text series too (the Writer then looks each series' kind up).
func benchTextSeries(b *testing.B, w *Writer) {
	var rs []Reading
	for i := range 100 {
		rs = append(rs, textOf("thermostat"+strconv.Itoa(i), "mode", 1763769600e9, "heat"))
	}
	res := make(chan Result, 1)
	if err := w.Submit(context.Background(), rs, func(r Result) { res <- r }); err != nil {
		b.Fatal(err)
	}
	if r := <-res; r.Err != nil || r.Stored != len(rs) {
		b.Fatalf("%+v", r)
	}
}

// BenchmarkStore_TextDiskPerReading stores a day (30 for the buttons) of
// 100 series of each kind through the Writer, seals, compacts and reports
// the bytes on disk per reading, as BenchmarkStore_DiskPerReading does:
//
//   - thermostat: a mode (heat, off, cool, auto, eco) sent every 10 s, ms
//     timestamps with ±5 ms of jitter, that changes every 5 minutes;
//   - button: 4 presses a day at random times, each a burst of 2 or 3
//     (single, double, hold) a second or two apart, for 30 days;
//   - temperature: a number every 10 s, 2 decimals, timestamps as the
//     thermostat's, to compare.
func BenchmarkStore_TextDiskPerReading(b *testing.B) {
	start := int64(1763769600) * 1e9 // a UTC midnight
	modes := []string{"heat", "off", "cool", "auto", "eco"}
	events := []string{"single", "double", "hold"}
	gens := []struct {
		name string
		gen  func(series int) []Reading
	}{
		{"thermostat", func(i int) []Reading {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			var rs []Reading
			mode := rng.IntN(len(modes))
			for k := range 8640 {
				if k%30 == 0 {
					mode = (mode + 1 + rng.IntN(len(modes)-1)) % len(modes)
				}
				rs = append(rs, textOf("thermostat"+strconv.Itoa(i), "mode", start+int64(k)*10e9+int64(rng.IntN(11)-5)*1e6, modes[mode]))
			}
			return rs
		}},
		{"button", func(i int) []Reading {
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			var rs []Reading
			for d := range 30 {
				for range 4 {
					ts := start + int64(d)*encoding.NanosPerDay + rng.Int64N(encoding.NanosPerDay-10e9)/1e6*1e6
					for range 2 + rng.IntN(2) {
						rs = append(rs, textOf("button"+strconv.Itoa(i), "action", ts, events[rng.IntN(len(events))]))
						ts += 1e9 + rng.Int64N(1e9)/1e6*1e6
					}
				}
			}
			return rs
		}},
		{"temperature", func(i int) []Reading {
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			sn := newSensor(uint64(i), 21, 3, 0.05, 2)
			var rs []Reading
			for k := range 8640 {
				ts := start + int64(k)*10e9 + int64(rng.IntN(11)-5)*1e6
				rs = append(rs, Reading{Device: "room" + strconv.Itoa(i), Metric: "temperature", TS: ts, Value: sn.at(ts)})
			}
			return rs
		}},
	}
	for _, g := range gens {
		b.Run(g.name, func(b *testing.B) {
			for b.Loop() {
				d := diskPerReadingOf(b, 100, g.gen)
				b.ReportMetric(d.total, "bytes/reading")
				b.ReportMetric(d.readings, "readings-bytes/reading")
				b.ReportMetric(d.stats, "stats-bytes/reading")
			}
		})
	}
}

// diskPerReadingOf is diskPerReading for the readings gen makes of each
// of series series, written in time order in commits of up to 2,000.
func diskPerReadingOf(b *testing.B, series int, gen func(series int) []Reading) diskUse {
	dir := b.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{SealIdle: 24 * time.Hour, SealCheck: 24 * time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	var all []Reading
	for i := range series {
		all = append(all, gen(i)...)
	}
	// In time order, as they would come.
	slices.SortStableFunc(all, func(a, b Reading) int { return cmp.Compare(a.TS, b.TS) })
	results := make(chan Result, 1)
	for len(all) > 0 {
		n := min(2000, len(all))
		if err := w.Submit(ctx, all[:n], func(r Result) { results <- r }); err != nil {
			b.Fatal(err)
		}
		r := <-results
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		all = all[n:]
	}
	if err := w.SealDue(ctx, time.Unix(0, math.MaxInt64)); err != nil {
		b.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if err := s.db.Flatten(2); err != nil {
		b.Fatal(err)
	}
	total := float64(s.ReadingCount())
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
		return float64(n) / total
	}
	d := diskUse{readings: share(encoding.KindPoint, encoding.KindBucket, encoding.KindText), stats: share(encoding.KindMinute, encoding.KindHour, encoding.KindDay)}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	d.total = float64(dirBytes(b, dir)) / total
	return d
}
