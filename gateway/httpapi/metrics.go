package httpapi

import (
	"time"
)

// collector exposes the counters that /v1/status shows, read at scrape
// time, so the two never disagree.
type collector struct {
	opts Options

	messages, readings, stored, duplicates, ignored, failed, rejected *Desc
	commits, commitErrors, commitSeconds, checkpoints                 *Desc
	gathered                                                          *Desc
	storeReadings, storeSeries, diskBytes, mqttConnected              *Desc
	diskFree, diskReserve, foreignBytes, paused                       *Desc
	upPending, upOldest, upSent, upBatches, upRetries, upParked       *Desc
	upSkipped, upLastSuccess, upNextAttempt, upDropped                *Desc
	mqttRefused                                                       *Desc
	retLastRun, retRemoved, retDropped, retPaused, retOldest          *Desc
	retNewest, retMaxDisk                                             *Desc
	clockSynced, clockTrusted                                         *Desc
	restamped, unmatched, skipped                                     *Desc
	refused, maxSeries, maxPerDevice                                  *Desc
	reading, state                                                    *Desc
}

func newCollector(opts Options) *collector {
	d := func(name, help string, labels ...string) *Desc {
		return NewDesc("cairn_"+name, help, labels...)
	}
	return &collector{
		opts:          opts,
		messages:      d("ingest_messages_total", "MQTT messages received on configured topics."),
		readings:      d("ingest_readings_total", "Readings decoded from messages."),
		stored:        d("ingest_stored_total", "Readings new to the store."),
		duplicates:    d("ingest_duplicates_total", "Readings that were stored already (redelivery)."),
		ignored:       d("ingest_ignored_fields_total", "Payload fields skipped (text that is no value, missing values, arrays, readings a topic's metrics filter drops)."),
		restamped:     d("ingest_restamped_total", "Readings given the receive time for a device time before 2000."),
		unmatched:     d("ingest_unmatched_total", "Messages on topics that no pattern of mqtt.topics matches (not stored)."),
		skipped:       d("ingest_skipped_total", "Messages on a configured topic that are not readings (availability, command, bridge, discovery, meta), by kind.", "kind"),
		failed:        d("ingest_failed_total", "Messages whose readings could not be stored (not acknowledged)."),
		rejected:      d("ingest_rejected_total", "Messages rejected as bad input, by reason.", "reason"),
		refused:       d("ingest_refused_readings_total", "Readings not stored because each would have made a new series over a limit."),
		commits:       d("store_commits_total", "Group commits synced to disk."),
		gathered:      d("store_gathered_commits_total", "Group commits that waited for other sensors to join them (store.commit_wait)."),
		commitErrors:  d("store_commit_errors_total", "Group commits that failed."),
		commitSeconds: d("store_commit_seconds_total", "Time spent writing and syncing group commits."),
		checkpoints:   d("store_checkpoints_total", "Checkpoints of the journal: its readings written as runs and records, synced."),
		storeReadings: d("store_readings", "Distinct readings in the store."),
		storeSeries:   d("store_series", "Series (device and metric) in the store."),
		maxSeries:     d("store_max_series", "The most series the store takes (store.max_series; 0: no limit)."),
		maxPerDevice:  d("store_max_series_per_device", "The most series a device may have (store.max_series_per_device; 0: no limit)."),
		diskBytes:     d("store_disk_bytes", "Size of cairn's files in the data directory (what the disk cap counts)."),
		diskFree:      d("store_disk_free_bytes", "Free space on the data directory's file system."),
		diskReserve:   d("store_disk_reserve_bytes", "Free space below which ingest pauses."),
		foreignBytes:  d("store_foreign_bytes", "Size of the files in the data directory that are not cairn's."),
		paused:        d("ingest_paused", "1 while the store takes no new readings (the disk cap, or too little free space)."),
		mqttConnected: d("mqtt_connected", "1 when the broker listens or the subscriber is connected."),
		upPending:     d("uplink_pending_readings", "Stored readings not yet accepted upstream, by upstream.", "upstream"),
		upOldest:      d("uplink_oldest_pending_timestamp_seconds", "Timestamp of the first reading not yet sent (0 when none), by upstream.", "upstream"),
		upSent:        d("uplink_sent_readings_total", "Readings the upstream accepted, by upstream.", "upstream"),
		upBatches:     d("uplink_sent_batches_total", "Batches the upstream accepted, by upstream.", "upstream"),
		upRetries:     d("uplink_retries_total", "Attempts to send a batch again, by upstream.", "upstream"),
		upParked:      d("uplink_parked_batches", "Batches refused as malformed, kept on disk, by upstream.", "upstream"),
		upSkipped:     d("uplink_skipped_readings_total", "Readings not sent: older than uplink.max_age, or not finite, by upstream.", "upstream"),
		upLastSuccess: d("uplink_last_success_timestamp_seconds", "When the upstream last accepted a batch (0: never since start), by upstream.", "upstream"),
		upNextAttempt: d("uplink_next_attempt_timestamp_seconds", "When a refused batch is tried again (0: not waiting), by upstream.", "upstream"),
		upDropped:     d("uplink_dropped_unsent_total", "Readings dropped before the upstream took them, by the disk cap or its max_backlog (life of the data directory), by upstream.", "upstream"),
		mqttRefused:   d("mqtt_refused_total", "Connections, messages and subscriptions the embedded broker refused, and limits hit, by reason.", "reason"),
		retLastRun:    d("retention_last_run_timestamp_seconds", "When retention last ran (0: not since start)."),
		retRemoved:    d("retention_removed_readings_total", "Raw readings retention deleted, by age or for the disk cap."),
		retDropped:    d("retention_dropped_unsent_total", "Readings the disk cap or an upstream's max_backlog dropped before they were sent upstream (life of the data directory)."),
		retPaused:     d("retention_paused", "1 while retention by age is paused (the clock is not trusted, or far ahead of the newest reading)."),
		clockSynced:   d("clock_synchronized", "1 while the kernel says the clock is synchronised (NTP), 0 while it says not; absent where it cannot say."),
		clockTrusted:  d("clock_trusted", "1 while cairn trusts the clock: retention by age and the future-skew check run only then."),
		retOldest:     d("retention_oldest_reading_timestamp_seconds", "Timestamp of the oldest reading stored (0: none)."),
		retNewest:     d("retention_newest_reading_timestamp_seconds", "Timestamp of the newest reading stored (0: none)."),
		retMaxDisk:    d("retention_max_disk_bytes", "The data directory's cap (0: none)."),
		reading:       d("reading", "The newest reading of a series (http.metrics_readings), by device, metric and unit.", "device", "metric", "unit"),
		state:         d("state", "1 for the newest text of a text series, 0 for the other texts it has held (http.metrics_readings), by device, metric and state.", "device", "metric", "state"),
	}
}

// Collect implements Collector.
func (c *collector) Collect(s *Sink) {
	counter, gauge := s.Counter, s.Gauge
	in := c.opts.Ingest.Stats()
	counter(c.messages, float64(in.Messages))
	counter(c.readings, float64(in.Readings))
	counter(c.stored, float64(in.Stored))
	counter(c.duplicates, float64(in.Duplicates))
	counter(c.ignored, float64(in.Ignored))
	counter(c.failed, float64(in.Failed))
	counter(c.restamped, float64(in.Restamped))
	counter(c.unmatched, float64(in.Unmatched))
	for kind, n := range in.Skipped {
		counter(c.skipped, float64(n), kind)
	}
	counter(c.refused, float64(in.Refused))
	for reason, n := range in.ByReason {
		counter(c.rejected, float64(n), reason)
	}
	ws := c.opts.Writer.Stats()
	maxSeries, perDevice := c.opts.Writer.SeriesLimits()
	gauge(c.maxSeries, float64(maxSeries))
	gauge(c.maxPerDevice, float64(perDevice))
	counter(c.commits, float64(ws.Commits))
	counter(c.gathered, float64(ws.Gathered))
	counter(c.commitErrors, float64(ws.Failures))
	counter(c.commitSeconds, float64(ws.SyncNanos)/1e9)
	counter(c.checkpoints, float64(ws.Checkpoints))
	if st, err := c.opts.Store.Stats(); err == nil {
		gauge(c.storeReadings, float64(st.Readings))
		gauge(c.storeSeries, float64(st.Series))
		gauge(c.diskBytes, float64(st.DiskBytes))
		gauge(c.foreignBytes, float64(st.ForeignBytes))
	}
	if c.opts.Headroom != nil {
		hs := c.opts.Headroom.Status()
		gauge(c.diskFree, float64(hs.FreeBytes))
		gauge(c.diskReserve, float64(hs.ReserveBytes))
	}
	paused := 0.0
	if c.opts.Writer.PausedReason() != "" {
		paused = 1
	}
	gauge(c.paused, paused)
	m := c.opts.MQTT()
	connected := 0.0
	if m.Connected {
		connected = 1
	}
	gauge(c.mqttConnected, connected)
	unix := func(t *time.Time) float64 {
		if t == nil {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	if c.opts.Clock != nil {
		cs := c.opts.Clock.Status()
		switch cs.Synced {
		case "yes":
			gauge(c.clockSynced, 1)
		case "no":
			gauge(c.clockSynced, 0)
		}
		trusted := 0.0
		if cs.Trusted {
			trusted = 1
		}
		gauge(c.clockTrusted, trusted)
	}
	if c.opts.Retention != nil {
		if rs, err := c.opts.Retention.Status(); err == nil {
			paused := 0.0
			if rs.PausedReason != "" {
				paused = 1
			}
			gauge(c.retLastRun, unix(rs.LastRun))
			counter(c.retRemoved, float64(rs.RemovedReadings))
			counter(c.retDropped, float64(rs.DroppedUnsent))
			gauge(c.retPaused, paused)
			gauge(c.retOldest, unix(rs.OldestReading))
			gauge(c.retNewest, unix(rs.NewestReading))
			gauge(c.retMaxDisk, float64(rs.MaxDiskBytes))
		}
	}
	for _, u := range c.opts.Uplinks {
		us := u.Status()
		gauge(c.upPending, float64(us.PendingReadings), us.Name)
		gauge(c.upOldest, unix(us.OldestPending), us.Name)
		counter(c.upSent, float64(us.SentReadings), us.Name)
		counter(c.upBatches, float64(us.SentBatches), us.Name)
		counter(c.upRetries, float64(us.Retries), us.Name)
		gauge(c.upParked, float64(us.ParkedBatches), us.Name)
		counter(c.upSkipped, float64(us.Skipped), us.Name)
		gauge(c.upLastSuccess, unix(us.LastSuccess), us.Name)
		gauge(c.upNextAttempt, unix(us.NextAttempt), us.Name)
		counter(c.upDropped, float64(us.DroppedUnsent), us.Name)
	}
	for reason, n := range m.RefusedByReason {
		counter(c.mqttRefused, float64(n), reason)
	}
	if c.opts.MetricsReadings {
		c.collectReadings(s, maxSeries)
	}
}

// collectReadings sends the newest reading of each series, at most max of
// them (0: no limit), sorted by device and metric: cairn_reading for a
// number, and for a text series cairn_state (collectStates). Were the store to
// hold more series than the limit (one lowered since they were stored),
// the first max are sent. A store that cannot be read is logged, and the
// gateway's own metrics are sent without the readings.
func (c *collector) collectReadings(s *Sink, max int) {
	rs, err := c.opts.Store.LatestAll()
	if err != nil {
		c.opts.Logger.Error("metrics: newest readings", "err", err)
		return
	}
	if max > 0 && len(rs) > max {
		rs = rs[:max]
	}
	for _, r := range rs {
		if r.Text != "" {
			c.collectStates(s, r)
			continue
		}
		s.Gauge(c.reading, r.Value, r.Device, r.Metric, r.Unit)
	}
}
