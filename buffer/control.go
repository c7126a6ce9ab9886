package buffer

import (
	"context"
	"maps"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
)

// SetRetention has the running Writer keep raw readings for rawMaxAge and
// the aggregate records of each level for statsMaxAge[level] from now on,
// as WriterOptions.RawMaxAge and StatsMaxAge do (0: for ever). The next
// hourly pass applies them; Prune applies them at once.
func (w *Writer) SetRetention(ctx context.Context, rawMaxAge time.Duration, statsMaxAge map[aggregate.Level]time.Duration) error {
	stats := maps.Clone(statsMaxAge)
	return w.do(ctx, func() error {
		w.opts.RawMaxAge = rawMaxAge
		w.opts.StatsMaxAge = stats
		return nil
	})
}

// SetRawLimits has the running Writer keep at most maxReadings readings
// of each series and the readings within window of each series' newest
// one (0: no limit), and cap the data directory at maxDiskBytes (0: no
// cap) while keeping the newest keepRecent of each series as long as
// anything older is left, as the WriterOptions of those names do.
// Retention applies them at its next run.
func (w *Writer) SetRawLimits(ctx context.Context, maxReadings int, window time.Duration, maxDiskBytes int64, keepRecent time.Duration) error {
	return w.do(ctx, func() error {
		w.opts.RawMaxReadingsPerSeries = maxReadings
		w.opts.RawWindowFromLatest = window
		w.opts.MaxDiskBytes = maxDiskBytes
		w.opts.KeepRecent = keepRecent
		return nil
	})
}
