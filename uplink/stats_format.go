package uplink

import (
	"math"
	"strconv"
	"time"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cairn-gateway/cairn/aggregate"
)

// How the records of Data Stats are written, per format (docs/uplink.md
// shows each):
//
//   - influx: one line per record, measurement uplink.measurement and
//     "_stats", tags device, gateway, group (minute or hour), metric and
//     unit (when the series has one), fields count (an integer), sum,
//     min, max and mean, stamped with the period's start in nanoseconds.
//     InfluxDB replaces a point written again with the same tags and
//     time: a record resent after a late reading replaces the one before.
//   - json: {"gateway":…,"batch":…,"group":"minute","stats":[{"id":…,
//     "device":…,"metric":…,"unit":…,"start":"RFC 3339","count":…,"sum":…,
//     "min":…,"max":…,"mean":…}]}, where a record's id (statsID) stays the
//     same when it is sent again.
//   - prometheus: five series per series of readings,
//     <measurement>_stats_count, _sum, _min, _max and _mean, with the
//     labels device, gateway, group, metric and unit (the names
//     VictoriaMetrics gives the line protocol above). Remote write cannot
//     replace a sample (Prometheus refuses a second value for a timestamp,
//     VictoriaMetrics keeps both), so a record's samples are stamped with
//     its period's start plus as many milliseconds as it counts readings
//     (statsMS): a record resent after a late reading counts more, and is
//     a later sample of the same period, the one a query reads.

// statStat names one of the five values of a record.
var statNames = [5]string{"count", "sum", "min", "max", "mean"}

// statValue returns the value of a record named statNames[i].
func statValue(st aggregate.Stats, i int) float64 {
	switch i {
	case 0:
		return float64(st.Count)
	case 1:
		return st.Sum
	case 2:
		return st.Min
	case 3:
		return st.Max
	}
	return st.Mean()
}

// encodeStats writes the records recs of periods of group as the batch
// whose id is batch, and returns the body and how many records were left
// out (in line protocol, those whose device or metric it cannot carry).
func (e *encoder) encodeStats(batch string, group aggregate.Level, recs []statsRecord) ([]byte, int) {
	switch e.format {
	case JSON:
		return e.statsJSON(batch, group, recs), 0
	case Prometheus:
		return e.statsPrometheus(group, recs), 0
	}
	return e.statsInflux(group, recs)
}

func (e *encoder) statsInflux(group aggregate.Level, recs []statsRecord) ([]byte, int) {
	b := e.buf[:0]
	skipped := 0
	for i := range recs {
		r := &recs[i]
		if !WritableName(r.device) || !WritableName(r.metric) {
			skipped++
			continue
		}
		b = append(b, e.measurement...)
		b = append(b, "_stats,device="...)
		b = appendEscaped(b, r.device, keySpecial)
		b = append(b, e.gatewayTag...)
		b = append(b, ",group="...)
		b = append(b, group.String()...)
		b = append(b, ",metric="...)
		b = appendEscaped(b, r.metric, keySpecial)
		if r.unit != "" && WritableName(r.unit) {
			b = append(b, ",unit="...)
			b = appendEscaped(b, r.unit, keySpecial)
		}
		b = append(b, " count="...)
		b = strconv.AppendUint(b, r.stats.Count, 10)
		b = append(b, "i,sum="...)
		b = strconv.AppendFloat(b, r.stats.Sum, 'g', -1, 64)
		b = append(b, ",min="...)
		b = strconv.AppendFloat(b, r.stats.Min, 'g', -1, 64)
		b = append(b, ",max="...)
		b = strconv.AppendFloat(b, r.stats.Max, 'g', -1, 64)
		b = append(b, ",mean="...)
		b = strconv.AppendFloat(b, r.stats.Mean(), 'g', -1, 64)
		b = append(b, ' ')
		b = strconv.AppendInt(b, r.start, 10)
		b = append(b, '\n')
	}
	e.buf = b
	return b, skipped
}

func (e *encoder) statsJSON(batch string, group aggregate.Level, recs []statsRecord) []byte {
	b := append(e.buf[:0], `{"gateway":`...)
	b = appendJSONString(b, e.gateway)
	b = append(b, `,"batch":`...)
	b = appendJSONString(b, batch)
	b = append(b, `,"group":"`...)
	b = append(b, group.String()...)
	b = append(b, `","stats":[`...)
	for i := range recs {
		r := &recs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStatsJSON(b, group, r)
	}
	b = append(b, "]}\n"...)
	e.buf = b
	return b
}

// appendStatsJSON appends r as an element of a JSON batch's stats.
func appendStatsJSON(b []byte, group aggregate.Level, r *statsRecord) []byte {
	b = append(b, `{"id":"`...)
	b = appendStatsID(b, group, r)
	b = append(b, `","device":`...)
	b = appendJSONString(b, r.device)
	b = append(b, `,"metric":`...)
	b = appendJSONString(b, r.metric)
	if r.unit != "" {
		b = append(b, `,"unit":`...)
		b = appendJSONString(b, r.unit)
	}
	b = append(b, `,"start":"`...)
	b = time.Unix(0, r.start).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","count":`...)
	b = strconv.AppendUint(b, r.stats.Count, 10)
	for k := 1; k < len(statNames); k++ {
		b = append(b, `,"`...)
		b = append(b, statNames[k]...)
		b = append(b, `":`...)
		b = strconv.AppendFloat(b, statValue(r.stats, k), 'g', -1, 64)
	}
	return append(b, '}')
}

// appendStatsID appends a record's id, as the characters of a JSON
// string: its start in nanoseconds, zero padded to 19 digits (ids sort by
// time), the group, the length of the device in bytes and the device,
// and the metric: "1795310160000000000-minute-7:kitchen-temperature". The
// length keeps two series from one id whatever their names hold.
func appendStatsID(b []byte, group aggregate.Level, r *statsRecord) []byte {
	var digits [20]byte
	ts := strconv.AppendUint(digits[:0], uint64(max(r.start, 0)), 10)
	for range 19 - len(ts) {
		b = append(b, '0')
	}
	b = append(b, ts...)
	b = append(b, '-')
	b = append(b, group.String()...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(len(r.device)), 10)
	b = append(b, ':')
	b = appendJSONChars(b, r.device)
	b = append(b, '-')
	return appendJSONChars(b, r.metric)
}

// statsMS is the timestamp, in milliseconds, of a record's samples in
// remote write: the period's start plus one millisecond per reading it
// counts, at most to the period's last millisecond.
func statsMS(group aggregate.Level, r *statsRecord) int64 {
	last := group.Duration().Milliseconds() - 1
	return r.start/1e6 + int64(min(r.stats.Count, uint64(last)))
}

// statsPrometheus writes recs, which are in order of device, metric and
// start, as a snappy-compressed remote write request: per series of
// readings (device, metric and unit) and per value of statNames one
// TimeSeries with a sample per record.
func (e *encoder) statsPrometheus(group aggregate.Level, recs []statsRecord) []byte {
	p := &e.prom
	b := p.pb[:0]
	for i := 0; i < len(recs); {
		first := &recs[i]
		j := i + 1
		for j < len(recs) && recs[j].device == first.device && recs[j].metric == first.metric && recs[j].unit == first.unit {
			j++
		}
		for k, stat := range statNames {
			p.names = appendPromName(p.names[:0], e.promPrefix+"stats_", stat)
			size := promNameLabelSize(p.names) + promLabelSize("device", first.device) +
				promLabelSize("group", group.String()) + promLabelSize("metric", first.metric)
			if e.gateway != "" {
				size += promLabelSize("gateway", e.gateway)
			}
			if first.unit != "" {
				size += promLabelSize("unit", first.unit)
			}
			for _, r := range recs[i:j] {
				size += protowire.SizeTag(fieldTimeSeriesSamples) + protowire.SizeBytes(statsSampleSize(statsMS(group, &r)))
			}
			b = protowire.AppendTag(b, fieldWriteRequestTimeseries, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(size))
			b = appendPromNameLabel(b, p.names)
			b = appendPromLabel(b, "device", first.device)
			if e.gateway != "" {
				b = appendPromLabel(b, "gateway", e.gateway)
			}
			b = appendPromLabel(b, "group", group.String())
			b = appendPromLabel(b, "metric", first.metric)
			if first.unit != "" {
				b = appendPromLabel(b, "unit", first.unit)
			}
			for _, r := range recs[i:j] {
				ms := statsMS(group, &r)
				b = protowire.AppendTag(b, fieldTimeSeriesSamples, protowire.BytesType)
				b = protowire.AppendVarint(b, uint64(statsSampleSize(ms)))
				b = protowire.AppendTag(b, fieldSampleValue, protowire.Fixed64Type)
				b = protowire.AppendFixed64(b, math.Float64bits(statValue(r.stats, k)))
				if ms != 0 {
					b = protowire.AppendTag(b, fieldSampleTimestamp, protowire.VarintType)
					b = protowire.AppendVarint(b, uint64(ms))
				}
			}
		}
		i = j
	}
	p.pb = b
	e.buf = snappy.Encode(e.buf[:cap(e.buf)], b)
	return e.buf
}

func statsSampleSize(ms int64) int {
	n := protowire.SizeTag(fieldSampleValue) + protowire.SizeFixed64()
	if ms != 0 {
		n += protowire.SizeTag(fieldSampleTimestamp) + protowire.SizeVarint(uint64(ms))
	}
	return n
}
