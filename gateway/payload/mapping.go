package payload

import (
	"fmt"
	"math"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// Mapping tells how a JSON document that carries its own ids becomes
// readings: where its device id, time, metric name, value and unit are,
// and which of its fields are readings. Field names are the document's
// keys joined with '.' ("uplink_message.decoded_payload.temperature").
// A mapped payload is one JSON object (an array of them is invalid_json);
// the zero Mapping reads it as format json reads an object.
type Mapping struct {
	// DeviceField names the field that holds the device id, when the
	// topic has none (default "device").
	DeviceField string
	// TimeField names the field that holds the reading time (default: a
	// top-level epoch, ts, time or timestamp field, in any case).
	TimeField string
	// TimeFormat says how the time field is written (see ParseTimeFormat);
	// the zero value tells RFC 3339 text and epoch numbers apart.
	TimeFormat TimeFormat
	// ValueField, if set, names the field that holds a value: the
	// document's own, or that of each object that has one
	// ({"temp":{"v":21.5,"u":"°C"}} with ValueField "v" gives metric
	// "temp"). Other fields are then not readings. A top-level value is
	// named by MetricField, else the topic's {metric}, else ValueField.
	ValueField string
	// MetricField names the field that holds the metric name of the
	// document's top-level ValueField (a whole name, not one under
	// StripPrefix).
	MetricField string
	// UnitField names the field beside a value that holds its unit; at
	// the top level, without ValueField, the unit of every reading.
	UnitField string
	// StripPrefix, if set, names the object whose fields are the readings,
	// named without it ("uplink_message.decoded_payload"); fields outside
	// it are envelope: not readings, and not counted.
	StripPrefix string
}

// Check reports the first problem with m's options.
func (m *Mapping) Check() error {
	if m.MetricField != "" && m.ValueField == "" {
		return fmt.Errorf("metric_field needs value_field")
	}
	return nil
}

// TimeFormat is how a time field is written.
type TimeFormat struct {
	kind   timeKind
	layout string // for timeLayout
}

type timeKind uint8

const (
	timeAuto    timeKind = iota // RFC 3339 text, or epoch by magnitude
	timeUnit                    // epoch in a fixed unit: scale ns per unit
	timeRFC3339                 // RFC 3339 / ISO 8601 text only
	timeLayout                  // a Go reference-time layout
)

// ParseTimeFormat parses a time format: "" or "auto" (RFC 3339 text, or
// an epoch number whose unit follows from its magnitude), "unix",
// "unix_ms", "unix_us", "unix_ns" (an epoch number, or text holding one,
// in that unit), "rfc3339", or a Go layout written with the reference
// time ("2006-01-02 15:04:05", "02.01.2006 15:04").
func ParseTimeFormat(s string) (TimeFormat, error) {
	switch s {
	case "", "auto":
		return TimeFormat{}, nil
	case "unix":
		return TimeFormat{kind: timeUnit, layout: "s"}, nil
	case "unix_ms":
		return TimeFormat{kind: timeUnit, layout: "ms"}, nil
	case "unix_us":
		return TimeFormat{kind: timeUnit, layout: "us"}, nil
	case "unix_ns":
		return TimeFormat{kind: timeUnit, layout: "ns"}, nil
	case "rfc3339":
		return TimeFormat{kind: timeRFC3339}, nil
	}
	// A layout must give back the date of a time it formats.
	ref := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if t, err := time.Parse(s, ref.Format(s)); err != nil || t.YearDay() != ref.YearDay() || t.Year() != ref.Year() {
		return TimeFormat{}, fmt.Errorf("unknown time format %q (want auto, unix, unix_ms, unix_us, unix_ns, rfc3339, or a Go layout such as \"2006-01-02 15:04:05\")", s)
	}
	return TimeFormat{kind: timeLayout, layout: s}, nil
}

// docReader turns the leaves of the Decoder's document into readings.
type docReader struct {
	d                *Decoder
	out              []buffer.Reading
	first            int // len(out) before the document
	ignored, missing int
	err              *RejectError
	skip             *SkipError // the message is not a reading
	// notState, if not nil, reports the names whose text is no state (an
	// id, a version): ignored and counted, like a text that is a date and
	// time, where other texts are text readings. A preset sets it; a
	// mapping keeps every text.
	notState func(name []byte) bool
}

func (r *docReader) fail(err *RejectError) {
	if r.err == nil {
		r.err = err
	}
}

// time returns the time of leaf l written in format f, restamped if it is
// before 2000 (see restamp); with no leaf, recv.
func (r *docReader) time(l *leaf, f TimeFormat, recv time.Time) int64 {
	if l == nil {
		return recv.UnixNano()
	}
	l.used = true
	doc := &r.d.doc
	raw := doc.str(l)
	ns, prob := int64(0), ""
	switch {
	case l.kind != leafNumber && l.kind != leafString:
		prob = "want a time"
	case f.kind == timeUnit:
		n, ok := scanNumber(raw, 0, false)
		if !ok || n.end != len(raw) {
			prob = "want an epoch number"
			break
		}
		ns, prob = epochIn(n, f.layout)
	case f.kind == timeLayout && l.kind == leafString:
		zone := r.d.zone
		if zone == nil {
			zone = time.UTC
		}
		t, err := time.ParseInLocation(f.layout, string(raw), zone)
		switch {
		case err != nil:
			prob = fmt.Sprintf("want the layout %q", f.layout)
		case t.Unix() < 0:
			prob = "time before 1970"
		case t.Unix() >= math.MaxInt64/int64(time.Second):
			prob = "time after 2262"
		default:
			ns = t.UnixNano()
		}
	case f.kind == timeLayout:
		prob = fmt.Sprintf("want text in the layout %q", f.layout)
	case l.kind == leafString:
		ns, prob = parseISOTime(raw, r.d.zone)
		if n, ok := scanNumber(raw, 0, false); prob != "" && f.kind == timeAuto && ok && n.end == len(raw) && len(raw) > 0 && isDigit(raw[0]) {
			ns, prob = epochNanos(n)
		}
	case f.kind == timeAuto:
		n, _ := scanNumber(raw, 0, true)
		ns, prob = epochNanos(n)
	default:
		prob = "want RFC 3339 text"
	}
	if prob != "" {
		r.fail(rejectf(ReasonBadTimestamp, "field %s = %s: %s", quote(doc.name(l)), quote(raw), prob))
		return 0
	}
	return r.d.restamp(ns, recv)
}

// epochIn converts a scanned epoch number in unit ("s", "ms", "us", "ns")
// to nanoseconds.
func epochIn(n numScan, unit string) (int64, string) {
	if n.neg {
		return 0, "negative epoch time"
	}
	digits := 0
	switch unit {
	case "s":
		digits = 9
	case "ms":
		digits = 6
	case "us":
		digits = 3
	}
	ns, ok := floorScaled(n.mant, n.exp+digits)
	if !ok || ns > math.MaxInt64 {
		return 0, "epoch time out of range"
	}
	return int64(ns), ""
}

// emit makes leaf l a reading of device named name at ts, with unit, or
// counts it as ignored. A text is a text reading, without a unit, unless
// its key is unit or notState says it is no state.
func (r *docReader) emit(l *leaf, device string, name []byte, ts int64, unit string) {
	if r.err != nil {
		return
	}
	l.used = true
	v, kind, word := r.d.doc.value(l)
	switch kind {
	case textMissing:
		r.ignored++
		r.missing++
		return
	case textOther:
		if _, key := splitLast(name); l.kind != leafString || string(key) == "unit" || r.notState != nil && (r.notState(name) || isTime(r.d.doc.str(l))) {
			r.ignored++
			return
		}
	case textNonFinite:
		r.fail(rejectf(ReasonNonFinite, "metric %s: %s is not a finite float64", quote(name), quote(r.d.doc.str(l))))
		return
	}
	metric, known := r.d.names[string(name)] // names in the cache are valid
	if !known {
		if prob := encoding.CheckName(name, encoding.MaxMetricLen); prob != "" {
			r.fail(rejectf(ReasonBadMetric, "metric %s: %s", quote(name), prob))
			return
		}
		metric = r.d.intern(name)
	}
	if kind == textOther {
		if rd, ok := r.d.textReading(device, metric, ts, r.d.doc.str(l)); ok {
			r.out = append(r.out, rd)
		}
		return
	}
	r.out = append(r.out, buffer.Reading{Device: device, Metric: metric, TS: ts, Value: v, Word: word, Unit: unit})
}

// device returns the device id held by leaf l, marking it used.
func (r *docReader) device(l *leaf) string {
	l.used = true
	b := r.d.doc.str(l)
	if l.kind != leafString && l.kind != leafNumber {
		r.fail(rejectf(ReasonBadDevice, "field %s: want a string", quote(r.d.doc.name(l))))
		return ""
	}
	if prob := encoding.CheckDevice(b); prob != "" {
		r.fail(rejectf(ReasonBadDevice, "device %s: %s", quote(b), prob))
		return ""
	}
	return r.d.intern(b)
}

// text returns the text of a string leaf, marking it used, or "".
func (r *docReader) text(l *leaf) string {
	if l == nil {
		return ""
	}
	l.used = true
	if l.kind != leafString {
		return ""
	}
	return r.d.internUnit(r.d.doc.str(l))
}

// result returns what the document gave: its readings, or no_readings if
// it gave none and no value was missing.
func (r *docReader) result(dst []buffer.Reading) ([]buffer.Reading, int, error) {
	if r.err != nil {
		return dst, 0, r.err
	}
	if len(r.out) == r.first && r.missing == 0 && len(r.d.dropped) == 0 {
		return dst, 0, rejectf(ReasonNoReadings, "no values (%d ignored)", r.ignored)
	}
	return r.out, r.ignored, nil
}

// timeLeaf returns the leaf that gives the document's time: the named
// field, or else the best top-level field of timeFields.
func (doc *document) timeLeaf(name string) *leaf {
	if name != "" {
		return doc.find(name)
	}
	var best *leaf
	rank := 0
	for i := range doc.leaves {
		l := &doc.leaves[i]
		if l.depth != 1 {
			continue
		}
		for k, n := range timeFields {
			if k+1 >= rank && asciiEqualFold(doc.name(l), n) {
				best, rank = l, k+1
			}
		}
	}
	return best
}

// decodeMapped reads a JSON document by Mapping m.
func (d *Decoder) decodeMapped(dst []buffer.Reading, m *Mapping, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	r, err := d.readDocument(dst, payload)
	if err != nil {
		return dst, 0, err
	}
	return r.mapped(dst, m, device, metric, recv)
}

// mapped reads the flattened document by m (see Mapping).
func (r *docReader) mapped(dst []buffer.Reading, m *Mapping, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	doc := &r.d.doc
	deviceField := m.DeviceField
	if deviceField == "" {
		deviceField = "device"
	}
	if l := doc.find(deviceField); l != nil {
		if device != "" {
			l.used = true
			if m.DeviceField == "" {
				r.ignored++ // as format json counts it
			}
		} else {
			device = r.device(l)
		}
	}
	if device == "" && r.err == nil {
		r.fail(rejectf(ReasonBadDevice, "no device: topic has no %s and payload no %s field", placeholderDevice, quote(deviceField)))
	}
	ts := r.time(doc.timeLeaf(m.TimeField), m.TimeFormat, recv)
	docUnit := ""
	if m.UnitField != "" && m.ValueField == "" {
		docUnit = r.text(doc.find(m.UnitField))
	}
	var name []byte
	for i := range doc.leaves {
		l := &doc.leaves[i]
		if l.used {
			continue
		}
		n := doc.name(l)
		if m.StripPrefix != "" {
			if !doc.under(l, m.StripPrefix) {
				continue
			}
			n = n[len(m.StripPrefix)+1:]
		}
		unit := docUnit
		if m.ValueField != "" {
			parent, key := splitLast(n)
			if string(key) != m.ValueField {
				continue
			}
			if len(parent) == 0 {
				switch {
				case m.MetricField != "":
					ml := doc.find(m.MetricField)
					if ml == nil || ml.kind != leafString {
						r.fail(rejectf(ReasonBadMetric, "field %s: want the metric name as a string", quote(m.MetricField)))
						continue
					}
					ml.used = true
					parent = doc.str(ml)
				case metric != "":
					parent = []byte(metric)
				default:
					parent = key
				}
			}
			if m.UnitField != "" {
				full := doc.name(l)
				unit = r.text(doc.sibling(i, len(full)-len(key), m.UnitField))
			}
			n = parent
		} else if metric != "" && string(n) == "value" && l.depth == 1 && r.onlyValue(l) {
			n = []byte(metric)
		}
		name = append(name[:0], n...)
		r.emit(l, device, name, ts, unit)
	}
	return r.result(dst)
}

// onlyValue reports whether l, the document's top-level "value" field, is
// its only candidate reading of a number, or, with no number, of a text:
// the topic's {metric} then names it (as in format json).
func (r *docReader) onlyValue(l *leaf) bool {
	doc := &r.d.doc
	numbers, texts := 0, 0
	for i := range doc.leaves {
		c := &doc.leaves[i]
		if c.used || c.kind == leafArray || c.kind == leafNull {
			continue
		}
		_, kind, _ := doc.value(c)
		_, key := splitLast(doc.name(c))
		switch {
		case kind == textNumber:
			numbers++
		case kind == textOther && c.kind == leafString && string(key) != "unit" && (r.notState == nil || !r.notState(doc.name(c)) && !isTime(doc.str(c))):
			texts++
		}
	}
	if _, kind, _ := doc.value(l); kind == textNumber {
		return numbers == 1
	}
	return numbers == 0 && texts == 1
}

// splitLast splits a dotted name at its last '.'.
func splitLast(n []byte) (parent, key []byte) {
	for i := len(n) - 1; i >= 0; i-- {
		if n[i] == '.' {
			return n[:i], n[i+1:]
		}
	}
	return nil, n
}
