package uplink

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

// TestStats_BytesPerDay logs the bytes a day of 100 sensors, each sending
// a temperature (°C) and a humidity (%) once a second, costs upstream in
// each format: raw readings in a batch a second (what uplink.interval 1s
// makes of a live stream), minute records in a batch a minute and hour
// records in a batch an hour (data: stats), with gzip and without. It
// encodes the first 5 minutes of the day and multiplies by 288 (the hour
// records: one batch, of those minutes' readings, times 24). Values are random walks with
// two decimals, as cairn sim makes them; request bodies only (each request
// adds its headers, about 300 bytes, and with https its share of TLS).
func TestStats_BytesPerDay(t *testing.T) {
	const sensors, seconds = 100, 300
	type series struct{ device, metric, unit string }
	var ss []series
	for d := range sensors {
		dev := fmt.Sprintf("sensor-%03d", d)
		ss = append(ss, series{dev, "temperature", "°C"}, series{dev, "humidity", "%"})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]float64, len(ss))
	for i := range value {
		value[i] = 20 + float64(i%7)
	}
	start := int64(1_795_305_600) * int64(time.Second) // a day's start, UTC
	minutes := make([][]aggregate.Stats, seconds/60)
	for m := range minutes {
		minutes[m] = make([]aggregate.Stats, len(ss))
	}
	hour := make([]aggregate.Stats, len(ss))

	type total struct{ plain, gz, requests int }
	var raw, minute, hourly [3]total // by Format
	formats := []Format{Influx, JSON, Prometheus}
	encs := make([]*encoder, len(formats))
	for i, f := range formats {
		encs[i] = newEncoder(f, "readings", "pi-kitchen")
	}
	add := func(tot *total, body []byte) {
		tot.plain += len(body)
		tot.gz += gzipLen(t, body)
		tot.requests++
	}
	var rs []buffer.OutboxReading
	for sec := range seconds {
		rs = rs[:0]
		for i, s := range ss {
			value[i] = math.Round((value[i]+rng.Float64()*0.2-0.1)*100) / 100
			ts := start + int64(sec)*int64(time.Second) + int64(i/2)*7*int64(time.Millisecond)
			rs = append(rs, buffer.OutboxReading{Seq: uint64(sec*len(ss) + i), Reading: buffer.Reading{Device: s.device, Metric: s.metric, Unit: s.unit, TS: ts, Value: value[i]}})
			minutes[sec/60][i].Add(value[i])
			hour[i].Add(value[i])
		}
		for k, e := range encs {
			body, _ := e.encode("pi-kitchen-1", rs)
			add(&raw[k], body)
		}
	}
	records := func(group aggregate.Level, at int64, st []aggregate.Stats) []statsRecord {
		var recs []statsRecord
		for i, s := range ss {
			recs = append(recs, statsRecord{device: s.device, metric: s.metric, unit: s.unit, start: at, stats: st[i]})
		}
		return recs
	}
	for m := range minutes {
		recs := records(aggregate.Minute, start+int64(m)*int64(time.Minute), minutes[m])
		for k, e := range encs {
			body, _ := e.encodeStats("pi-kitchen-1", aggregate.Minute, recs)
			add(&minute[k], body)
		}
	}
	for k, e := range encs {
		body, _ := e.encodeStats("pi-kitchen-1", aggregate.Hour, records(aggregate.Hour, start, hour))
		add(&hourly[k], body)
	}

	const times = 86400 / seconds
	const perDay = 86400 * sensors * 2
	mib := func(n, times int) string {
		return fmt.Sprintf("%.3f MiB (%.4f/reading)", float64(n)*float64(times)/(1<<20), float64(n)*float64(times)/perDay)
	}
	t.Logf("100 sensors x 2 readings a second, 17,280,000 readings a day: bytes a day upstream (bodies)")
	t.Logf("%-10s %-8s %36s %30s %8s", "format", "data", "plain", "gzip", "requests")
	for k, f := range formats {
		for _, row := range []struct {
			name  string
			tot   total
			times int
		}{{"readings", raw[k], times}, {"minute", minute[k], times}, {"hour", hourly[k], 24}} {
			gz := mib(row.tot.gz, row.times)
			plain := mib(row.tot.plain, row.times)
			if f == Prometheus {
				plain, gz = plain+" (snappy)", "-"
			}
			t.Logf("%-10s %-8s %36s %30s %8d", f, row.name, plain, gz, row.tot.requests*row.times)
		}
	}
	// Stats must cost far less than the readings they summarize.
	for k, f := range formats {
		if minute[k].plain*5 > raw[k].plain || hourly[k].plain*24*30 > minute[k].plain*times {
			t.Errorf("%s: readings %d, minute records %d bytes in %d s, hour records %d bytes: stats do not save what they should",
				f, raw[k].plain, minute[k].plain, seconds, hourly[k].plain)
		}
	}
}

// gzipLen is the length of b gzipped as the uplink gzips it.
func gzipLen(t *testing.T, b []byte) int {
	t.Helper()
	var z bytes.Buffer
	if err := gzipBody(&z, b); err != nil {
		t.Fatal(err)
	}
	return z.Len()
}
