package payload

import (
	"math"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// SenML times whose magnitude is below 2**28 seconds (about 8.5 years)
// are relative to the time of reading, here the receive time; others are
// seconds since the epoch (RFC 8428 §4.5.3).
const senmlRelative = (1 << 28) * int64(time.Second)

// senmlVersion is the newest SenML version cairn reads (RFC 8428 §4.4:
// 10). A pack with a larger bver must not be used.
const senmlVersion = 10

// decodeSenML decodes a SenML pack (RFC 8428, the JSON representation):
// a JSON array of records, the base fields bn, bt, bu, bv and bver of a
// record applying to it and to the records after it.
//   - A record's value is v plus bv, vb (true 1, false 0), or vs read as
//     text (see Decode: "23.5" and "ON" are values, "unavailable" is
//     missing, any other string is a text reading, without a unit: see
//     text.go). vd, and the sums
//     s and bs, are ignored and counted: a sum is another quantity than
//     the value. A record with no value field gives nothing; one with
//     several is invalid_senml.
//   - Its time is bt + t, in seconds, fractions allowed: with a magnitude
//     below 2**28 it is relative to the receive time (negative is the
//     past, absent is now), else the time since the epoch. ut is ignored.
//   - Its name is bn + n. The device is the topic's {device} if the
//     pattern has one; otherwise it is bn without one trailing ':' or '/'
//     ("urn:dev:ow:10e2073a01080063:" gives "urn:dev:ow:10e2073a01080063"),
//     or n when there is no bn. The metric is n when both bn and n are
//     present, or when n is and the topic names the device. Otherwise the
//     name (all bn, or all n) names only a sensor, and the metric is the
//     topic's {metric}, else the record's unit (u, or bu: "%RH"); with
//     neither it is bad_metric.
//   - A reading's unit is the record's u, else bu.
//   - bver above 10, a field whose name ends in '_' (must be understood,
//     RFC 8428 §4.4), a field of the wrong JSON type, or an element that is
//     not an object make the pack invalid_senml. Other fields are ignored.
func (d *Decoder) decodeSenML(dst []buffer.Reading, payload []byte, start int, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if c := payload[start]; c != '[' {
		reason := ReasonInvalidSenML
		if jsonKind(c) == "not JSON" {
			reason = ReasonInvalidJSON
		}
		return dst, 0, rejectf(reason, "payload is %s, want a SenML pack (a JSON array of records)", jsonKind(c))
	}
	p := senmlParser{
		jsonParser: jsonParser{d: d, s: payload, i: start + 1, out: dst},
		device:     device, metric: metric, recv: recv,
	}
	d.base, d.bunit = d.base[:0], d.bunit[:0]
	if err := p.pack(); err != nil {
		return dst, 0, err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		return dst, 0, p.unexpected("after top-level value")
	}
	if p.err != nil {
		return dst, 0, p.err
	}
	if len(p.out) == len(dst) && p.missing == 0 && len(d.dropped) == 0 {
		return dst, 0, rejectf(ReasonNoReadings, "no values in %d records (%d ignored)", p.rec, p.ignored)
	}
	return p.out, p.ignored, nil
}

// senmlParser decodes one SenML pack. The base name and base unit live in
// the Decoder's base and bunit, a record's name and unit in rname and
// runit.
type senmlParser struct {
	jsonParser
	device, metric string // from the topic
	recv           time.Time

	bv   float64 // base value
	btNS int64   // base time in nanoseconds
	rec  int     // records seen
}

// senmlRecord is what one record says, before the base fields apply.
type senmlRecord struct {
	hasN, hasU, hasT bool
	t                int64 // nanoseconds
	values           int   // value fields: v, vb, vs, vd
	v                float64
	kind             textKind // of the value; textOther for vd and a text
	word             string   // the value's state word or boolean (see parseText)
	text             bool     // the value is vs's text, in the Decoder's vtext
	fromV            bool     // the value is v, to which bv adds
	sum              bool
}

// pack decodes the records of the array whose '[' is behind p.i.
func (p *senmlParser) pack() *RejectError {
	p.skipSpace()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		var err *RejectError
		if p.peek() == '{' {
			err = p.record()
		} else {
			if c := p.peek(); c != 0 {
				p.fail(rejectf(ReasonInvalidSenML, "record %d is %s, want an object", p.rec, jsonKind(c)))
			}
			err = p.value(1)
		}
		p.rec++
		if err != nil {
			return err
		}
		if more, err := p.next(']'); !more {
			return err
		}
	}
}

// record decodes the record object at p.i.
func (p *senmlParser) record() *RejectError {
	var r senmlRecord
	if p.enter('}') {
		return nil
	}
	for {
		ks, ke, esc, err := p.key()
		if err != nil {
			return err
		}
		key := p.s[ks:ke]
		if esc {
			p.d.key = unescape(p.d.key[:0], key)
			key = p.d.key
		}
		if err := p.field(key, &r); err != nil {
			return err
		}
		more, err := p.next('}')
		if err != nil {
			return err
		}
		if !more {
			p.resolve(&r)
			return nil
		}
	}
}

// field decodes the value of the record field key into r, or into the
// base fields.
func (p *senmlParser) field(key []byte, r *senmlRecord) *RejectError {
	switch k := senmlField(key); k {
	case "bn", "n", "bu", "u", "vs", "vd":
		s, ok, err := p.text(k)
		if err != nil || !ok {
			return err
		}
		switch k {
		case "bn":
			p.d.base = append(p.d.base[:0], s...)
		case "n":
			p.d.rname, r.hasN = append(p.d.rname[:0], s...), true
		case "bu":
			p.d.bunit = append(p.d.bunit[:0], s...)
		case "u":
			p.d.runit, r.hasU = append(p.d.runit[:0], s...), true
		case "vs":
			r.values++
			r.v, r.kind, r.fromV, r.text, r.word = 0, textOther, false, true, ""
			if v, kind, word := parseText(s); kind != textOther {
				r.v, r.kind, r.text, r.word = v, kind, false, word
			} else {
				p.d.vtext = append(p.d.vtext[:0], s...)
			}
		case "vd":
			r.values++
			r.kind, r.fromV, r.text, r.word = textOther, false, false, ""
		}
	case "bt", "t", "bv", "v", "s", "bs", "ut", "bver":
		n, start, ok, err := p.num(k)
		if err != nil || !ok {
			return err
		}
		raw := p.s[start:n.end]
		switch k {
		case "bt", "t":
			ns, ok := secondsNanos(n)
			if !ok {
				p.fail(rejectf(ReasonBadTimestamp, "record %d: field %q = %s: out of range", p.rec, k, quote(raw)))
				return nil
			}
			if k == "bt" {
				p.btNS = ns
			} else {
				r.t, r.hasT = ns, true
			}
		case "bv":
			p.bv = n.float(p.s, start)
		case "v":
			r.values++
			r.v, r.kind, r.fromV, r.word = n.float(p.s, start), textNumber, true, ""
		case "s":
			r.sum = true
		case "bver":
			if n.float(p.s, start) > senmlVersion {
				p.fail(rejectf(ReasonInvalidSenML, "record %d: bver %s: newer than SenML version %d", p.rec, raw, senmlVersion))
			}
		}
	case "vb":
		switch c := p.peek(); c {
		case 't', 'f':
			lit := "false"
			if c == 't' {
				lit = "true"
			}
			if err := p.literal(lit); err != nil {
				return err
			}
			r.values++
			r.kind, r.fromV, r.v, r.word = textNumber, false, 0, "false"
			if c == 't' {
				r.v, r.word = 1, "true"
			}
		default:
			return p.wrongType(k, "a boolean")
		}
	default:
		if len(key) > 0 && key[len(key)-1] == '_' {
			p.fail(rejectf(ReasonInvalidSenML, "record %d: field %s must be understood, and is not known", p.rec, quote(key)))
		}
		return p.value(2)
	}
	return nil
}

// senmlFields are the fields of a record that cairn reads.
var senmlFields = [...]string{"bn", "bt", "bu", "bv", "bs", "bver", "n", "u", "v", "vs", "vb", "vd", "s", "t", "ut"}

// senmlField returns key as one of senmlFields, or "" if it is none of
// them, without allocating.
func senmlField(key []byte) string {
	for _, f := range senmlFields {
		if string(key) == f {
			return f
		}
	}
	return ""
}

// text reads the string value of field k; ok is false if the value is not
// a string, which is noted as invalid_senml.
func (p *senmlParser) text(k string) (s []byte, ok bool, err *RejectError) {
	if p.peek() != '"' {
		return nil, false, p.wrongType(k, "a string")
	}
	start, end, esc, err := p.str()
	if err != nil {
		return nil, false, err
	}
	s = p.s[start:end]
	if esc {
		p.d.str = unescape(p.d.str[:0], s)
		s = p.d.str
	}
	return s, true, nil
}

// num reads the number value of field k; ok is false if the value is not a
// number, which is noted as invalid_senml.
func (p *senmlParser) num(k string) (n numScan, start int, ok bool, err *RejectError) {
	if c := p.peek(); c != '-' && !isDigit(c) {
		return n, 0, false, p.wrongType(k, "a number")
	}
	n, start, err = p.number()
	return n, start, err == nil, err
}

// wrongType notes that field k's value, at p.i, is not of the type want,
// and skips it.
func (p *senmlParser) wrongType(k, want string) *RejectError {
	if c := p.peek(); c != 0 {
		p.fail(rejectf(ReasonInvalidSenML, "record %d: field %q is %s, want %s", p.rec, k, jsonKind(c), want))
	}
	return p.value(2)
}

// resolve turns the record r, with the base fields, into a reading.
func (p *senmlParser) resolve(r *senmlRecord) {
	if r.sum {
		p.ignored++
	}
	switch {
	case r.values == 0:
		return
	case r.values > 1:
		p.fail(rejectf(ReasonInvalidSenML, "record %d has %d value fields, want one of v, vb, vs, vd", p.rec, r.values))
		return
	case r.text:
		p.resolveText(r)
		return
	case r.kind == textOther:
		p.ignored++
		return
	case r.kind == textMissing:
		p.ignored++
		p.missing++
		return
	case r.kind == textNonFinite:
		p.fail(rejectf(ReasonNonFinite, "record %d: value is not finite", p.rec))
		return
	}
	v := r.v
	if r.fromV {
		v += p.bv
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		p.fail(rejectf(ReasonNonFinite, "record %d: value overflows float64", p.rec))
		return
	}
	device, metric, ok := p.names(r)
	if !ok {
		return
	}
	ts, ok := p.time(r)
	if !ok {
		return
	}
	unit := p.d.bunit
	if r.hasU {
		unit = p.d.runit
	}
	var u string
	if len(unit) > 0 {
		u = p.d.internUnit(unit)
	}
	p.out = append(p.out, buffer.Reading{Device: device, Metric: metric, TS: ts, Value: v, Word: r.word, Unit: u})
}

// resolveText turns the record r, whose value is a text, into a text
// reading (without a unit: a text has none).
func (p *senmlParser) resolveText(r *senmlRecord) {
	device, metric, ok := p.names(r)
	if !ok {
		return
	}
	ts, ok := p.time(r)
	if !ok {
		return
	}
	if rd, ok := p.d.textReading(device, metric, ts, p.d.vtext); ok {
		p.out = append(p.out, rd)
	}
}

// names returns the device and metric of record r (see decodeSenML).
func (p *senmlParser) names(r *senmlRecord) (device, metric string, ok bool) {
	bn, n := p.d.base, p.d.rname[:0]
	if r.hasN {
		n = p.d.rname
	}
	var devPart, metPart []byte
	switch {
	case len(bn) > 0 && len(n) > 0:
		devPart, metPart = trimSep(bn), n
	case len(bn) > 0:
		devPart = trimSep(bn)
	case p.device != "":
		metPart = n
	default:
		devPart = trimSep(n)
	}
	if device = p.device; device == "" {
		if len(devPart) == 0 {
			p.fail(rejectf(ReasonBadDevice, "record %d: no name, and the topic has no %s", p.rec, placeholderDevice))
			return "", "", false
		}
		if prob := encoding.CheckDevice(devPart); prob != "" {
			p.fail(rejectf(ReasonBadDevice, "record %d: device %s: %s", p.rec, quote(devPart), prob))
			return "", "", false
		}
		device = p.d.intern(devPart)
	}
	switch unit := p.d.bunit; {
	case len(metPart) > 0:
	case p.metric != "":
		metPart = append(p.d.name[:0], p.metric...)
	default:
		if r.hasU {
			unit = p.d.runit
		}
		if len(unit) == 0 {
			p.fail(rejectf(ReasonBadMetric, "record %d: name %s has no metric part, and there is no unit or %s in the topic", p.rec, quote(devPart), placeholderMetric))
			return "", "", false
		}
		metPart = unit
	}
	if prob := encoding.CheckName(metPart, encoding.MaxMetricLen); prob != "" {
		p.fail(rejectf(ReasonBadMetric, "record %d: metric %s: %s", p.rec, quote(metPart), prob))
		return "", "", false
	}
	return device, p.d.intern(metPart), true
}

// trimSep returns name without one trailing ':' or '/'.
func trimSep(name []byte) []byte {
	if n := len(name); n > 0 && (name[n-1] == ':' || name[n-1] == '/') {
		return name[:n-1]
	}
	return name
}

// time returns the time of record r (see decodeSenML).
func (p *senmlParser) time(r *senmlRecord) (int64, bool) {
	bt, t := p.btNS, r.t
	ts := bt + t
	if (bt > 0 && t > 0 && ts < 0) || (bt < 0 && t < 0 && ts >= 0) {
		p.fail(rejectf(ReasonBadTimestamp, "record %d: bt + t out of range", p.rec))
		return 0, false
	}
	switch {
	case ts > -senmlRelative && ts < senmlRelative:
		ts += p.recv.UnixNano()
		p.d.relative(ts)
		return ts, true
	case ts < 0:
		p.fail(rejectf(ReasonBadTimestamp, "record %d: time %s is before 1970", p.rec, time.Unix(0, ts).UTC().Format(time.RFC3339Nano)))
		return 0, false
	}
	return p.d.restamp(ts, p.recv), true
}

// secondsNanos converts a scanned number of seconds to nanoseconds,
// truncated toward zero; ok is false if that overflows an int64.
func secondsNanos(n numScan) (int64, bool) {
	ns, ok := floorScaled(n.mant, n.exp+9)
	if !ok || ns > math.MaxInt64 {
		return 0, false
	}
	if n.neg {
		return -int64(ns), true
	}
	return int64(ns), true
}
