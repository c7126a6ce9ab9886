package payload

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// decodeInflux decodes InfluxDB line protocol
// (https://docs.influxdata.com/influxdb/v2/reference/syntax/line-protocol/),
// one point a line:
//
//		measurement[,tag=value...] field=value[,field=value...] [timestamp]
//
//	  - Lines end with '\n' (a '\r' before it is dropped). Blank lines and
//	    lines whose first byte after spaces is '#' are skipped. One or more
//	    spaces separate the sections.
//	  - A backslash escapes ',', ' ' and '\' in the measurement, and also '='
//	    in tag keys, tag values and field keys; '"' and '\' in string field
//	    values. Before any other byte it is a backslash.
//	  - Each field is a reading named measurement.field. Its value is a float
//	    (1, -1.5, 1e3), an integer (1i) or unsigned integer (1u) in range, a
//	    boolean (t, T, true, True, TRUE are 1; f, F, false, False, FALSE are
//	    0), or a double-quoted string read as text (see Decode: "23.5" and
//	    "ON" are values, "unavailable" is missing, other strings are texts:
//	    state="heat" is a text reading, see text.go).
//	  - The device is the topic's {device}, else the line's "device" tag,
//	    else its "host" tag (Telegraf's). Other tags are not kept: lines that
//	    differ only in them give readings of the same series. (The telegraf
//	    preset differs: see Route.lineTags.)
//	  - The timestamp is an integer whose unit follows from its magnitude
//	    (see EpochMillisFrom) rather than the protocol's fixed nanoseconds:
//	    devices send seconds and milliseconds as often, and MQTT has no
//	    place for the write API's precision parameter. Every unit reads
//	    right from 1973 on, and earlier times are restamped anyway. Without
//	    one, the time is recv.
//
// A line that breaks the syntax makes the message invalid_line.
func (d *Decoder) decodeInflux(dst []buffer.Reading, payload []byte, device string, recv time.Time) ([]buffer.Reading, int, error) {
	p := lineParser{d: d, out: dst, device: device, recv: recv}
	for i := 0; i < len(payload); {
		end := bytes.IndexByte(payload[i:], '\n')
		if end < 0 {
			end = len(payload)
		} else {
			end += i
		}
		line := payload[i:end]
		i = end + 1
		p.no++
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		p.s, p.i = line, 0
		if err := p.line(); err != nil {
			return dst, 0, err
		}
	}
	if p.err != nil {
		return dst, 0, p.err
	}
	if len(p.out) == len(dst) && p.missing == 0 && len(d.dropped) == 0 {
		return dst, 0, rejectf(ReasonNoReadings, "no values in %d lines (%d ignored)", p.no, p.ignored)
	}
	return p.out, p.ignored, nil
}

// lineParser decodes line protocol one line at a time. Syntax errors stop
// it at once; other problems are kept in err, the first one winning, while
// it goes on checking the syntax.
type lineParser struct {
	d      *Decoder
	s      []byte // the line
	i      int    // next byte in s
	no     int    // line number, from 1
	out    []buffer.Reading
	device string // from the topic
	recv   time.Time

	ignored, missing int
	err              *RejectError
}

func (p *lineParser) fail(err *RejectError) {
	if p.err == nil {
		p.err = err
	}
}

// syntax returns the invalid_line error for what the line lacks at p.i.
func (p *lineParser) syntax(format string, args ...any) *RejectError {
	e := rejectf(ReasonInvalidLine, format, args...)
	e.Detail = "line " + strconv.Itoa(p.no) + ": " + e.Detail
	return e
}

func (p *lineParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *lineParser) skipSpaces() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// Bytes a backslash escapes.
const (
	escMeasurement = ", \\"
	escKey         = ",= \\"
	escString      = "\"\\"
)

// scan returns the bytes from p.i up to the first byte of stop that is not
// escaped (with a backslash, by esc), or the end of the line.
func (p *lineParser) scan(stop, esc string) []byte {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\\' && p.i+1 < len(p.s) && strings.IndexByte(esc, p.s[p.i+1]) >= 0 {
			p.i += 2
			continue
		}
		if strings.IndexByte(stop, c) >= 0 {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

// unescapeLine appends raw to dst, dropping each backslash before a byte
// of esc.
func unescapeLine(dst, raw []byte, esc string) []byte {
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) && strings.IndexByte(esc, raw[i+1]) >= 0 {
			i++
		}
		dst = append(dst, raw[i])
	}
	return dst
}

// isDeviceTag reports whether the raw tag key names the device with
// lineTags: d.deviceTag, or host when it is "".
func (d *Decoder) isDeviceTag(key []byte) bool {
	if d.deviceTag == "" {
		return string(key) == "host"
	}
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == d.deviceTag
	}
	d.key = unescapeLine(d.key[:0], key, escKey)
	return string(d.key) == d.deviceTag
}

// line decodes the line p.s.
func (p *lineParser) line() *RejectError {
	p.skipSpaces()
	if p.i == len(p.s) || p.s[p.i] == '#' {
		return nil
	}
	meas := p.scan(", ", escMeasurement)
	if len(meas) == 0 {
		return p.syntax("empty measurement")
	}
	p.d.base = unescapeLine(p.d.base[:0], meas, escMeasurement)
	p.d.tags = p.d.tags[:0]
	devRank := 0 // 2: device tag in d.rname, 1: host tag
	for p.peek() == ',' {
		p.i++
		key := p.scan(",= ", escKey)
		if p.peek() != '=' || len(key) == 0 {
			return p.syntax("tag %s: want key=value", quote(key))
		}
		p.i++
		val := p.scan(", ", escKey)
		if len(val) == 0 {
			return p.syntax("tag %s: empty value", quote(key))
		}
		rank := 0
		switch string(key) { // neither name has a byte to escape
		case "device":
			rank = 2
		case "host":
			rank = 1
		}
		if p.d.lineTags { // Telegraf's: the host (or deviceTag) is the device, other tags name the series
			if rank = 0; p.d.isDeviceTag(key) {
				rank = 2
			} else if string(key) != "host" { // the agent's host, with deviceTag
				if len(p.d.tags) > 0 {
					p.d.tags = append(p.d.tags, ',')
				}
				p.d.tags = unescapeLine(p.d.tags, key, escKey)
				p.d.tags = append(p.d.tags, '=')
				p.d.tags = unescapeLine(p.d.tags, val, escKey)
			}
		}
		if rank > devRank {
			p.d.rname = unescapeLine(p.d.rname[:0], val, escKey)
			devRank = rank
		}
	}
	if p.peek() != ' ' {
		return p.syntax("no field set")
	}
	p.skipSpaces()
	if p.i == len(p.s) {
		return p.syntax("no field set")
	}
	device := p.device
	if devRank > 0 && (device == "" || p.d.lineTags) {
		if prob := encoding.CheckDevice(p.d.rname); prob != "" {
			p.fail(rejectf(ReasonBadDevice, "line %d: device %s: %s", p.no, quote(p.d.rname), prob))
		} else {
			device = p.d.intern(p.d.rname)
		}
	}
	first := len(p.out)
	for {
		if err := p.field(device); err != nil {
			return err
		}
		if p.peek() != ',' {
			break
		}
		p.i++
	}
	ts, err := p.timestamp()
	if err != nil {
		return err
	}
	if len(p.out) > first && device == "" && devRank == 0 {
		p.fail(rejectf(ReasonBadDevice, "line %d: no device: topic has no %s and the line no device or host tag", p.no, placeholderDevice))
	}
	for k := first; k < len(p.out); k++ {
		if ts < 0 {
			p.out[k].TS = p.recv.UnixNano()
		} else {
			p.out[k].TS = p.d.restamp(ts, p.recv)
		}
	}
	return nil
}

// field decodes the field at p.i.
func (p *lineParser) field(device string) *RejectError {
	key := p.scan(",= ", escKey)
	if p.peek() != '=' || len(key) == 0 {
		return p.syntax("field %s: want key=value", quote(key))
	}
	p.i++
	var (
		v    float64
		kind = textNumber
		raw  []byte
		word string // of a state word or a boolean (see parseText)
	)
	if p.peek() == '"' {
		p.i++
		raw = p.scan(`"`, escString)
		if p.peek() != '"' {
			return p.syntax("field %s: unterminated string", quote(key))
		}
		p.i++
		p.d.str = unescapeLine(p.d.str[:0], raw, escString)
		v, kind, word = parseText(p.d.str)
	} else {
		raw = p.scan(", ", "")
		var prob string
		if v, prob = lineValue(raw); prob != "" {
			return p.syntax("field %s = %s: %s", quote(key), quote(raw), prob)
		}
		if math.IsInf(v, 0) {
			kind = textNonFinite
		}
		word = lineBool(raw)
	}
	if c := p.peek(); c != ',' && c != ' ' && c != 0 {
		return p.syntax("field %s: unexpected %s after the value", quote(key), quoteByte(c))
	}
	p.d.key = unescapeLine(p.d.key[:0], key, escKey)
	p.d.name = append(append(append(p.d.name[:0], p.d.base...), '.'), p.d.key...)
	if len(p.d.tags) > 0 {
		p.d.name = append(append(append(p.d.name, '{'), p.d.tags...), '}')
	}
	switch kind {
	case textMissing:
		p.ignored++
		p.missing++
		return nil
	case textNonFinite:
		p.fail(rejectf(ReasonNonFinite, "line %d: field %s = %s is not finite", p.no, quote(p.d.key), quote(raw)))
		return nil
	}
	if prob := encoding.CheckName(p.d.name, encoding.MaxMetricLen); prob != "" {
		if p.d.lineTags && len(p.d.tags) > 0 && len(p.d.name) > encoding.MaxMetricLen {
			p.ignored++ // a tag set too long to name a series: the field alone is lost
			return nil
		}
		p.fail(rejectf(ReasonBadMetric, "line %d: metric %s: %s", p.no, quote(p.d.name), prob))
		return nil
	}
	if kind == textOther {
		if r, ok := p.d.textReading(device, p.d.intern(p.d.name), 0, p.d.str); ok {
			p.out = append(p.out, r)
		}
		return nil
	}
	p.out = append(p.out, buffer.Reading{Device: device, Metric: p.d.intern(p.d.name), Value: v, Word: word})
	return nil
}

// lineBool returns the word of an unquoted field value that is a boolean,
// "true" or "false", or "" for a number.
func lineBool(b []byte) string {
	switch {
	case len(b) > 0 && (b[0] == 't' || b[0] == 'T'):
		return "true"
	case len(b) > 0 && (b[0] == 'f' || b[0] == 'F'):
		return "false"
	}
	return ""
}

// lineValue parses an unquoted field value: a boolean, an integer with
// suffix i or u, or a float. It returns a problem if it is none of them.
func lineValue(b []byte) (float64, string) {
	switch string(b) {
	case "t", "T", "true", "True", "TRUE":
		return 1, ""
	case "f", "F", "false", "False", "FALSE":
		return 0, ""
	case "":
		return 0, "no value"
	}
	if last := b[len(b)-1]; last == 'i' || last == 'u' {
		digits, neg := b[:len(b)-1], false
		if len(digits) > 0 && digits[0] == '-' && last == 'i' {
			digits, neg = digits[1:], true
		}
		limit := uint64(math.MaxUint64)
		if last == 'i' {
			limit = math.MaxInt64
			if neg {
				limit++
			}
		}
		if len(digits) == 0 {
			return 0, "want an integer before " + string(last)
		}
		var u uint64
		for _, c := range digits {
			if !isDigit(c) {
				return 0, "want an integer before " + string(last)
			}
			if u > (limit-uint64(c-'0'))/10 {
				return 0, "integer out of range"
			}
			u = u*10 + uint64(c-'0')
		}
		v := float64(u)
		if neg {
			v = -v
		}
		return v, ""
	}
	n, ok := scanNumber(b, 0, false)
	if !ok || n.end != len(b) {
		return 0, "want a number, a boolean or a double-quoted string"
	}
	return n.float(b, 0), ""
}

// timestamp decodes the optional timestamp at p.i, in nanoseconds, and
// checks that nothing follows it; -1 means none.
func (p *lineParser) timestamp() (int64, *RejectError) {
	if p.peek() == ' ' {
		p.skipSpaces()
	}
	if p.i == len(p.s) {
		return -1, nil
	}
	raw := p.scan(" \t", "")
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	for _, c := range digits {
		if !isDigit(c) {
			return 0, p.syntax("timestamp %s: want an integer", quote(raw))
		}
	}
	if len(digits) == 0 {
		return 0, p.syntax("timestamp %s: want an integer", quote(raw))
	}
	p.skipSpaces()
	if p.i < len(p.s) {
		return 0, p.syntax("unexpected %s after the timestamp", quoteByte(p.s[p.i]))
	}
	n, _ := scanNumber(raw, 0, false)
	ns, prob := epochNanos(n)
	if prob != "" {
		p.fail(rejectf(ReasonBadTimestamp, "line %d: timestamp %s: %s", p.no, quote(raw), prob))
		return -1, nil
	}
	return ns, nil
}
