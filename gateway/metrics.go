package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes the counters that /v1/status shows, read at scrape
// time, so the two never disagree.
type collector struct {
	opts APIOptions

	messages, readings, stored, duplicates, ignored, failed, rejected *prometheus.Desc
	commits, commitErrors, commitSeconds                              *prometheus.Desc
	storeReadings, storeSeries, diskBytes, mqttConnected              *prometheus.Desc
}

func newCollector(opts APIOptions) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cairn_"+name, help, labels, nil)
	}
	return &collector{
		opts:          opts,
		messages:      d("ingest_messages_total", "MQTT messages received on configured topics."),
		readings:      d("ingest_readings_total", "Readings decoded from messages."),
		stored:        d("ingest_stored_total", "Readings new to the store."),
		duplicates:    d("ingest_duplicates_total", "Readings that were stored already (redelivery)."),
		ignored:       d("ingest_ignored_fields_total", "Payload fields skipped (strings, nulls, arrays)."),
		failed:        d("ingest_failed_total", "Messages whose readings could not be stored (not acknowledged)."),
		rejected:      d("ingest_rejected_total", "Messages rejected as bad input, by reason.", "reason"),
		commits:       d("store_commits_total", "Group commits synced to disk."),
		commitErrors:  d("store_commit_errors_total", "Group commits that failed."),
		commitSeconds: d("store_commit_seconds_total", "Time spent writing and syncing group commits."),
		storeReadings: d("store_readings", "Distinct readings in the store."),
		storeSeries:   d("store_series", "Series (device and metric) in the store."),
		diskBytes:     d("store_disk_bytes", "Size of the data directory."),
		mqttConnected: d("mqtt_connected", "1 when the broker listens or the subscriber is connected."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	in := c.opts.Ingester.Stats()
	counter(c.messages, float64(in.Messages))
	counter(c.readings, float64(in.Readings))
	counter(c.stored, float64(in.Stored))
	counter(c.duplicates, float64(in.Duplicates))
	counter(c.ignored, float64(in.Ignored))
	counter(c.failed, float64(in.Failed))
	for reason, n := range in.ByReason {
		counter(c.rejected, float64(n), reason)
	}
	ws := c.opts.Writer.Stats()
	counter(c.commits, float64(ws.Commits))
	counter(c.commitErrors, float64(ws.Failures))
	counter(c.commitSeconds, float64(ws.SyncNanos)/1e9)
	if st, err := c.opts.Store.Stats(); err == nil {
		gauge(c.storeReadings, float64(st.Readings))
		gauge(c.storeSeries, float64(st.Series))
		gauge(c.diskBytes, float64(st.DiskBytes))
	}
	connected := 0.0
	if c.opts.MQTT().Connected {
		connected = 1
	}
	gauge(c.mqttConnected, connected)
}
