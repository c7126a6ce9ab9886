package uplink

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/buffer"
)

// Format is how a batch is written for the upstream.
type Format int

const (
	// Influx is InfluxDB line protocol: one line per device, unit and
	// timestamp, the device, the gateway and the unit (when the series
	// has one) as tags, metrics as float fields (a text reading as a
	// string field, appendStringField), nanosecond timestamps.
	// InfluxDB 1.x/2.x/3.x, VictoriaMetrics, QuestDB and Telegraf take
	// it; a batch sent twice changes nothing. VictoriaMetrics keeps a
	// string field as a number: 0, or the number its text spells.
	Influx Format = iota
	// JSON is cairn's JSON batch for webhooks:
	//
	//	{"gateway":"pi-kitchen","batch":"pi-kitchen-1200",
	//	 "readings":[{"id":"…","device":"…","metric":"…","unit":"°C","ts":"RFC 3339","value":21.5}]}
	//
	// where a reading's id is stable across retries and sorts by time,
	// then device, then the reading's sequence number, and "unit" is
	// left out when the series has none. A text reading has "text":"heat"
	// in place of "value".
	JSON
	// Prometheus is Prometheus remote write 1.0: a protobuf WriteRequest,
	// snappy-compressed, as VictoriaMetrics (/api/v1/write), Prometheus
	// with its remote-write receiver, Mimir and Thanos receive take it.
	// One series per measurement and metric, device, gateway and unit;
	// names made valid for Prometheus (appendPromName); samples in
	// milliseconds. A text series goes as a state set, one series per
	// state with a label state (promStates). A batch sent twice changes
	// nothing.
	Prometheus
)

// ParseFormat parses the uplink.format config value.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "influx":
		return Influx, nil
	case "json":
		return JSON, nil
	case "prometheus":
		return Prometheus, nil
	}
	return 0, fmt.Errorf("must be influx, json or prometheus (got %q)", s)
}

func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case Prometheus:
		return "prometheus"
	}
	return "influx"
}

func (f Format) contentType() string {
	switch f {
	case JSON:
		return "application/json"
	case Prometheus:
		return "application/x-protobuf"
	}
	return "text/plain; charset=utf-8"
}

// fileExt is the extension of a parked batch's body.
func (f Format) fileExt() string {
	switch f {
	case JSON:
		return ".json"
	case Prometheus:
		return ".pb.snappy"
	}
	return ".lp"
}

// encoder writes batches in one format. Its buffers are reused.
//
// The unit of a reading is the one its series has when the batch is
// read from the outbox (buffer.Store.ReadOutbox), not one kept with the
// reading: the store keeps one unit per series, in memory, so the outbox
// entries and the journal, which share their encoding, stay as they were,
// and a reading costs no more bytes on the SD card. The price: readings
// still waiting when their series' unit changes (a device's firmware
// update during an outage, say) go upstream with the new unit, and a
// batch resent across such a change goes under another tag set.
type encoder struct {
	format      Format
	measurement string // escaped
	gatewayTag  string // ",gateway=…" escaped, or empty
	gateway     string
	promPrefix  string // the measurement and "_"
	buf         []byte
	prom        promEncoder
}

func newEncoder(f Format, measurement, gateway string) *encoder {
	e := &encoder{format: f, gateway: gateway, measurement: escape(measurement, measurementSpecial), promPrefix: promPrefix(measurement)}
	if gateway != "" {
		e.gatewayTag = ",gateway=" + escape(gateway, keySpecial)
	}
	return e
}

// encode writes the batch whose id is batch and returns the body. Only
// finite values are written (ingest refuses the others), and in line
// protocol only readings whose device and metric are WritableName; a
// reading that is left out is counted in skipped. A unit that is not
// WritableName is left out of line protocol, not its reading: the reading
// goes without a unit tag.
func (e *encoder) encode(batch string, rs []buffer.OutboxReading) (body []byte, skipped int) {
	switch e.format {
	case JSON:
		return e.json(batch, rs)
	case Prometheus:
		return e.prometheus(rs)
	}
	return e.influx(rs)
}

// sent tells the encoder that the upstream took the last batch it
// encoded (the Prometheus state set remembers its last states).
func (e *encoder) sent() {
	if e.format == Prometheus {
		e.prom.states.sent()
	}
}

// influx writes rs as line protocol. Consecutive readings of one device,
// unit and timestamp (the fields of one message, unless their series
// have different units) share a line, unless a metric repeats. Tags are
// in the order of their keys (device, gateway, unit), as InfluxDB
// prefers them.
func (e *encoder) influx(rs []buffer.OutboxReading) ([]byte, int) {
	b := e.buf[:0]
	skipped := 0
	lineStart := -1 // index in rs of the reading that opened the line
	lineUnit := ""  // the unit of the line's tags
	for i := range rs {
		r := &rs[i]
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || !WritableName(r.Device) || !WritableName(r.Metric) || !WritableText(r.Text) {
			skipped++
			continue
		}
		unit := r.Unit
		if !WritableName(unit) {
			unit = ""
		}
		same := lineStart >= 0 && rs[lineStart].Device == r.Device && rs[lineStart].TS == r.TS && lineUnit == unit
		if same {
			for j := lineStart; j < i; j++ {
				if rs[j].Metric == r.Metric {
					same = false
					break
				}
			}
		}
		if same {
			b = append(b, ',')
		} else {
			if lineStart >= 0 {
				b = append(b, ' ')
				b = strconv.AppendInt(b, rs[lineStart].TS, 10)
				b = append(b, '\n')
			}
			lineStart, lineUnit = i, unit
			b = append(b, e.measurement...)
			b = append(b, ",device="...)
			b = appendEscaped(b, r.Device, keySpecial)
			b = append(b, e.gatewayTag...)
			if unit != "" {
				b = append(b, ",unit="...)
				b = appendEscaped(b, unit, keySpecial)
			}
			b = append(b, ' ')
		}
		b = appendEscaped(b, r.Metric, keySpecial)
		b = append(b, '=')
		if r.IsText() {
			b = appendStringField(b, r.Text)
		} else {
			b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
		}
	}
	if lineStart >= 0 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, rs[lineStart].TS, 10)
		b = append(b, '\n')
	}
	e.buf = b
	return b, skipped
}

// json writes rs as cairn's JSON batch.
func (e *encoder) json(batch string, rs []buffer.OutboxReading) ([]byte, int) {
	b := append(e.buf[:0], `{"gateway":`...)
	b = appendJSONString(b, e.gateway)
	b = append(b, `,"batch":`...)
	b = appendJSONString(b, batch)
	b = append(b, `,"readings":[`...)
	skipped, n := 0, 0
	for i := range rs {
		r := &rs[i]
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
			skipped++
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":"`...)
		b = appendReadingID(b, r)
		b = append(b, `","device":`...)
		b = appendJSONString(b, r.Device)
		b = append(b, `,"metric":`...)
		b = appendJSONString(b, r.Metric)
		if r.Unit != "" {
			b = append(b, `,"unit":`...)
			b = appendJSONString(b, r.Unit)
		}
		b = append(b, `,"ts":"`...)
		b = time.Unix(0, r.TS).UTC().AppendFormat(b, time.RFC3339Nano)
		if r.IsText() {
			b = append(b, `","text":`...)
			b = appendJSONString(b, r.Text)
		} else {
			b = append(b, `","value":`...)
			b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
		}
		b = append(b, '}')
	}
	b = append(b, "]}\n"...)
	e.buf = b
	return b, skipped
}

// appendReadingID appends a reading's id, as the characters of a JSON
// string: its time in nanoseconds, zero padded to 19 digits (so that ids
// sort by time as strings), the device, and its sequence number in 16
// hex digits.
func appendReadingID(b []byte, r *buffer.OutboxReading) []byte {
	var digits [20]byte
	ts := strconv.AppendUint(digits[:0], uint64(max(r.TS, 0)), 10)
	for range 19 - len(ts) {
		b = append(b, '0')
	}
	b = append(b, ts...)
	b = append(b, '-')
	b = appendJSONChars(b, r.Device)
	b = append(b, '-')
	const hex = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hex[r.Seq>>uint(shift)&0xf])
	}
	return b
}

// The bytes line protocol escapes with a backslash: in a measurement,
// and in tag keys, tag values and field keys.
const (
	measurementSpecial = ", "
	keySpecial         = ",= "
)

// escape is appendEscaped for a string.
func escape(s, special string) string {
	return string(appendEscaped(nil, s, special))
}

// appendEscaped appends s with a backslash before each byte of special,
// as line protocol wants in names and tag values. s must be WritableName:
// its other backslashes stand for themselves.
func appendEscaped(b []byte, s, special string) []byte {
	if !strings.ContainsAny(s, special) {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(special, s[i]) >= 0 {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return b
}

// WritableName reports whether line protocol carries s, as a measurement,
// a tag value or a field key, so that every upstream reads back s: it
// holds no line break (line protocol has no escape for one), and no
// backslash at its end or before a comma, an equals sign, a space or
// another backslash. InfluxDB documents `\\` as an escaped backslash,
// and VictoriaMetrics reads it so, but InfluxDB 1.x reads it as two, and
// takes a backslash before a separator as escaping it whatever comes
// before: a name ending in a backslash cannot be written for it at all,
// and a batch with one is refused whole. A backslash anywhere else stands
// for itself in all of them.
func WritableName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n', '\r':
			return false
		case '\\':
			if i+1 == len(s) || strings.IndexByte(",= \\", s[i+1]) >= 0 {
				return false
			}
		}
	}
	return true
}

// WritableText reports whether line protocol carries the text s as a
// string field so that every upstream reads it back: it holds no line
// break. InfluxDB 1.x reads a line break inside a quoted string, but
// VictoriaMetrics ends the line there and drops both halves, with the
// other fields of the line.
func WritableText(s string) bool {
	return !strings.ContainsAny(s, "\n\r")
}

// appendStringField appends s as a line protocol string field value:
// quoted, with a backslash before each double quote and backslash, as
// the line protocol reference has it (InfluxDB 1.x, 2.x and 3.x read it
// back so). s must be WritableText.
func appendStringField(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, bytes that are not UTF-8 replaced by
// U+FFFD, everything else as it is.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendJSONChars(b, s)
	return append(b, '"')
}

// appendJSONChars is appendJSONString without the quotes.
func appendJSONChars(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	from := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, s[from:i]...)
				b = append(b, `\ufffd`...)
				i++
				from = i
				continue
			}
			i += n
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[from:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		from = i
	}
	return append(b, s[from:]...)
}
