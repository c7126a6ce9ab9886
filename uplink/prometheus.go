package uplink

import (
	"cmp"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cairn-gateway/cairn/buffer"
)

// The field numbers of Prometheus remote write 1.0 (prometheus.WriteRequest
// in prompb/remote.proto and prompb/types.proto): only the fields cairn
// writes.
const (
	fieldWriteRequestTimeseries = 1 // repeated TimeSeries
	fieldTimeSeriesLabels       = 1 // repeated Label
	fieldTimeSeriesSamples      = 2 // repeated Sample
	fieldLabelName              = 1 // string
	fieldLabelValue             = 2 // string
	fieldSampleValue            = 1 // double
	fieldSampleTimestamp        = 2 // int64, milliseconds
)

// promSeries is one series of a batch: the readings rs[order[from:to]],
// sorted by time.
type promSeries struct {
	from, to int
	name     []byte // into promEncoder.names
}

// promEncoder is the Prometheus encoder's reused state.
type promEncoder struct {
	order  []int
	series []promSeries
	names  []byte
	pb     []byte
	states promStates
}

// prometheus writes rs as a snappy-compressed remote write 1.0
// WriteRequest: one TimeSeries per device, metric and unit, its labels
// __name__ (the measurement and the metric, made a valid Prometheus
// metric name by promName), device, gateway and unit (the last two when
// not empty) in that order, which is the order of their names, and its
// samples in time order, in milliseconds, one per millisecond (the
// latest, of equal timestamps the last stored). Values that are not finite are skipped.
// A text series goes as a state set (promStates): one series per state,
// with the label state between gateway and unit, and samples 1 and 0.
func (e *encoder) prometheus(rs []buffer.OutboxReading) ([]byte, int) {
	p := &e.prom
	rs = p.states.expand(rs)
	p.order = p.order[:0]
	skipped := 0
	for i := range rs {
		if math.IsNaN(rs[i].Value) || math.IsInf(rs[i].Value, 0) {
			skipped++
			continue
		}
		p.order = append(p.order, i)
	}
	slices.SortStableFunc(p.order, func(a, b int) int {
		ra, rb := &rs[a], &rs[b]
		return cmp.Or(cmp.Compare(ra.Metric, rb.Metric), cmp.Compare(ra.Device, rb.Device),
			cmp.Compare(ra.Unit, rb.Unit), cmp.Compare(ra.Text, rb.Text), cmp.Compare(ra.TS, rb.TS))
	})
	// Group the sorted readings into series, and keep of the readings of
	// a series in one millisecond the latest (of equal timestamps the last
	// stored: the sort is stable): Prometheus refuses a
	// second value for a timestamp, and the whole request with it. The
	// kept readings move to the front of order.
	p.series, p.names = p.series[:0], p.names[:0]
	kept := 0
	for i := 0; i < len(p.order); {
		first := &rs[p.order[i]]
		from := kept
		j := i
		for ; j < len(p.order); j++ {
			r := &rs[p.order[j]]
			if r.Metric != first.Metric || r.Device != first.Device || r.Unit != first.Unit || r.Text != first.Text {
				break
			}
			if kept > from && promMS(&rs[p.order[kept-1]]) == promMS(r) {
				kept--
			}
			p.order[kept] = p.order[j]
			kept++
		}
		start := len(p.names)
		p.names = appendPromName(p.names, e.promPrefix, first.Metric)
		p.series = append(p.series, promSeries{from: from, to: kept, name: p.names[start:len(p.names):len(p.names)]})
		i = j
	}
	b := p.pb[:0]
	for _, s := range p.series {
		r := &rs[p.order[s.from]]
		size := promNameLabelSize(s.name) + promLabelSize("device", r.Device)
		if e.gateway != "" {
			size += promLabelSize("gateway", e.gateway)
		}
		if r.Text != "" {
			size += promLabelSize("state", r.Text)
		}
		if r.Unit != "" {
			size += promLabelSize("unit", r.Unit)
		}
		for _, k := range p.order[s.from:s.to] {
			size += protowire.SizeTag(fieldTimeSeriesSamples) + protowire.SizeBytes(promSampleSize(&rs[k]))
		}
		b = protowire.AppendTag(b, fieldWriteRequestTimeseries, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		b = appendPromNameLabel(b, s.name)
		b = appendPromLabel(b, "device", r.Device)
		if e.gateway != "" {
			b = appendPromLabel(b, "gateway", e.gateway)
		}
		if r.Text != "" {
			b = appendPromLabel(b, "state", r.Text)
		}
		if r.Unit != "" {
			b = appendPromLabel(b, "unit", r.Unit)
		}
		for _, k := range p.order[s.from:s.to] {
			b = appendPromSample(b, &rs[k])
		}
	}
	p.pb = b
	e.buf = snappy.Encode(e.buf[:cap(e.buf)], b)
	return e.buf, skipped
}

// promMS is a reading's time in milliseconds, as remote write has it.
func promMS(r *buffer.OutboxReading) int64 {
	return r.TS / 1e6
}

func promSampleSize(r *buffer.OutboxReading) int {
	n := protowire.SizeTag(fieldSampleValue) + protowire.SizeFixed64()
	if ms := promMS(r); ms != 0 {
		n += protowire.SizeTag(fieldSampleTimestamp) + protowire.SizeVarint(uint64(ms))
	}
	return n
}

func appendPromSample(b []byte, r *buffer.OutboxReading) []byte {
	b = protowire.AppendTag(b, fieldTimeSeriesSamples, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(promSampleSize(r)))
	b = protowire.AppendTag(b, fieldSampleValue, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(r.Value))
	if ms := promMS(r); ms != 0 {
		b = protowire.AppendTag(b, fieldSampleTimestamp, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(ms))
	}
	return b
}

// promLabelSize is the size of a Label field of a TimeSeries, tag
// included. A value that is not UTF-8 is written with U+FFFD in place of
// its bad bytes (promValueLen), as Prometheus takes only UTF-8.
func promLabelSize(name, value string) int {
	n := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(promValueLen(value))
	return protowire.SizeTag(fieldTimeSeriesLabels) + protowire.SizeBytes(n)
}

func appendPromLabel(b []byte, name, value string) []byte {
	n := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(promValueLen(value))
	b = protowire.AppendTag(b, fieldTimeSeriesLabels, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, fieldLabelName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, fieldLabelValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(promValueLen(value)))
	return appendValidUTF8(b, value)
}

// promNameLabelSize is promLabelSize of the label __name__, whose value
// name is made of valid characters already (appendPromName).
func promNameLabelSize(name []byte) int {
	n := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len("__name__")) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(name))
	return protowire.SizeTag(fieldTimeSeriesLabels) + protowire.SizeBytes(n)
}

func appendPromNameLabel(b, name []byte) []byte {
	n := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len("__name__")) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(name))
	b = protowire.AppendTag(b, fieldTimeSeriesLabels, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, fieldLabelName, protowire.BytesType)
	b = protowire.AppendString(b, "__name__")
	b = protowire.AppendTag(b, fieldLabelValue, protowire.BytesType)
	return protowire.AppendBytes(b, name)
}

// promValueLen is the length of s once appendValidUTF8 wrote it.
func promValueLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += utf8.RuneLen(utf8.RuneError)
		} else {
			n += size
		}
		i += size
	}
	return n
}

// appendValidUTF8 appends s with each byte that is not UTF-8 replaced by
// U+FFFD.
func appendValidUTF8(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// appendPromName appends the Prometheus metric name of metric, under
// prefix (the measurement and "_", from promPrefix): every character
// that is not a letter, a digit, "_" or ":" becomes "_", one per
// character (not per byte), and a name that would start with a digit
// starts with "_".
func appendPromName(b []byte, prefix, metric string) []byte {
	start := len(b)
	for _, s := range [2]string{prefix, metric} {
		for _, r := range s {
			if r < utf8.RuneSelf && promNameChar(byte(r)) {
				b = append(b, byte(r))
			} else {
				b = append(b, '_')
			}
		}
	}
	if len(b) > start && b[start] >= '0' && b[start] <= '9' {
		b = append(b, 0)
		copy(b[start+1:], b[start:len(b)-1])
		b[start] = '_'
	}
	if len(b) == start {
		b = append(b, '_')
	}
	return b
}

// promNameChar reports whether c may stand in a Prometheus metric name.
func promNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':'
}

// promPrefix is the part of every metric name before the metric's own:
// the measurement and "_".
func promPrefix(measurement string) string {
	return measurement + "_"
}
