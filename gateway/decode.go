package gateway

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/buffer"
)

// Format selects how Decode interprets a payload.
type Format int

const (
	// FormatAuto decodes a payload whose first non-whitespace byte is '{'
	// as JSON and anything else as a plain value.
	FormatAuto Format = iota
	// FormatJSON decodes the payload as one JSON object.
	FormatJSON
	// FormatValue decodes the payload as one plain number or boolean.
	FormatValue
)

// ParseFormat parses "auto", "json" or "value".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "auto":
		return FormatAuto, nil
	case "json":
		return FormatJSON, nil
	case "value":
		return FormatValue, nil
	}
	return 0, fmt.Errorf("unknown payload format %q (want auto, json or value)", s)
}

// String returns the name ParseFormat accepts for f.
func (f Format) String() string {
	switch f {
	case FormatAuto:
		return "auto"
	case FormatJSON:
		return "json"
	case FormatValue:
		return "value"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Reasons for which Decode rejects a message; RejectError.Reason is one of
// these. They are stable and suitable as metric label values.
const (
	ReasonPayloadTooLarge = "payload_too_large" // payload longer than Decoder.MaxPayload
	ReasonEmptyPayload    = "empty_payload"     // payload empty or only whitespace
	ReasonInvalidJSON     = "invalid_json"      // malformed JSON, or JSON that is not an object
	ReasonInvalidValue    = "invalid_value"     // plain payload that is not a number or boolean
	ReasonTooDeep         = "too_deep"          // JSON nested deeper than MaxDepth
	ReasonNonFinite       = "non_finite"        // number that overflows float64, or NaN/Inf text
	ReasonBadTimestamp    = "bad_timestamp"     // ts/time/timestamp field present but unusable
	ReasonBadDevice       = "bad_device"        // device id missing or not a valid name
	ReasonBadMetric       = "bad_metric"        // metric name not a valid name
	ReasonNoMetric        = "no_metric"         // plain value but no {metric} in the topic
	ReasonNoReadings      = "no_readings"       // JSON object without numeric or boolean fields
	// ReasonInternal is what RejectReason returns for an error that is not
	// a *RejectError; Decode never uses it in a RejectError.
	ReasonInternal = "internal"
)

// RejectError reports why Decode rejected a message as a whole.
type RejectError struct {
	Reason string // one of the Reason constants
	Detail string // human-readable specifics, may be empty
}

// Error returns "reason: detail", or just the reason if there is no detail.
func (e *RejectError) Error() string {
	if e.Detail == "" {
		return e.Reason
	}
	return e.Reason + ": " + e.Detail
}

// RejectReason returns the Reason of the *RejectError in err's chain, ""
// for a nil err, and ReasonInternal for any other error.
func RejectReason(err error) string {
	if err == nil {
		return ""
	}
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ReasonInternal
}

func rejectf(reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Limits on names and payload structure.
const (
	// MaxDeviceLen is the longest valid device id, in bytes.
	MaxDeviceLen = 64
	// MaxMetricLen is the longest valid metric name, in bytes.
	MaxMetricLen = 128
	// MaxDepth is the deepest JSON nesting Decode accepts: the payload
	// object is level 1, and every object or array inside it adds one.
	MaxDepth = 16
	// NameChars is the set of bytes allowed in device ids and metric names
	// ([A-Za-z0-9_.:-]). A name is 1 to MaxDeviceLen (device) or
	// MaxMetricLen (metric) bytes long and made only of these bytes. The
	// '.' also joins the keys of nested JSON objects into one metric name.
	NameChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"
)

// Epoch timestamps are numbers whose unit Decode infers from their
// magnitude v (the cut-offs lie between dates in 1973 and 5138):
//
//	v < 1e11          seconds
//	1e11 ≤ v < 1e14   milliseconds
//	1e14 ≤ v < 1e17   microseconds
//	1e17 ≤ v          nanoseconds
//
// Fractions are allowed in every unit and truncated to whole nanoseconds.
// Times after 2262-04-11T23:47:16.854775807Z do not fit a Reading.
const (
	EpochMillisFrom = 1e11
	EpochMicrosFrom = 1e14
	EpochNanosFrom  = 1e17
)

// maxInterned bounds the Decoder's name cache; when full it starts over.
const maxInterned = 1024

// Decoder turns MQTT payloads into readings.
//
// The zero Decoder is ready to use and has no payload limit. A Decoder keeps
// scratch buffers and a small cache of device and metric names between
// calls, so that decoding familiar payloads does not allocate; it must
// therefore be used by one goroutine at a time (use one per worker).
type Decoder struct {
	// MaxPayload is the longest payload accepted, in bytes; 0 means no
	// limit. It is checked before any parsing.
	MaxPayload int

	names map[string]string // interned names
	key   []byte            // unescaped object key
	str   []byte            // unescaped string value
	path  []byte            // dotted keys of the enclosing objects
	name  []byte            // metric name being built
}

// Decode decodes the payload of one MQTT message and appends its readings
// to dst. device and metric are the values the topic's {device} and
// {metric} placeholders captured, "" where the pattern had none. recv is the
// time the message was received; it is the reading time unless the payload
// carries one.
//
// On success out is dst with one or more readings appended and ignored
// counts the fields skipped on purpose: strings, nulls and arrays (each
// counted once, whatever it contains), and a payload "device" field that
// the topic's {device} overrides. On failure err is a *RejectError, out is
// dst unchanged and ignored is 0: a message is stored whole or not at all.
// An unknown format yields an error that is not a *RejectError.
//
// JSON payloads (format json, or auto when the payload starts with '{' after
// whitespace) must be one strict JSON object (RFC 8259):
//   - Each number field is a reading named by its key; keys of nested
//     objects are joined with '.' ({"env":{"t":1}} gives metric "env.t").
//     true and false are readings of 1 and 0. Strings, nulls and arrays are
//     ignored (but must be valid JSON). Every occurrence of a key counts.
//   - Top-level "ts", "time" and "timestamp" fields give the reading time
//     (if several are present, ts wins over time over timestamp). The value
//     is an RFC 3339 / ISO 8601 string, "2026-11-22T10:00:00Z", optionally
//     with fractional seconds, a ±hh:mm or ±hhmm offset instead of Z, a
//     space or 't' instead of 'T', or no zone at all meaning UTC; or it is
//     a non-negative epoch number whose unit follows from its magnitude
//     (see EpochMillisFrom). Anything else, or a time before
//     1970 or after 2262, rejects the message with bad_timestamp.
//   - The device is the topic's {device}. Without one, it is the top-level
//     "device" field, which must then be a string; with one, a "device"
//     field is ignored and counted.
//   - If the topic has {metric} and the object's only reading comes from a
//     top-level "value" field, as in {"value":21.5,"unit":"C"}, that
//     reading is named by {metric}. Otherwise {metric} is not used.
//
// Plain payloads (format value, or auto for other payloads) are a decimal
// number such as "21.5", "-3", "+1e3", ".5" or "007", or "true"/"false" for
// 1/0, with optional surrounding whitespace. They yield one reading named
// by the topic's {metric} (no_metric if there is none) at time recv.
//
// Device ids and metric names must be valid names (see NameChars); values
// must be finite.
func (d *Decoder) Decode(dst []buffer.Reading, format Format, payload []byte, device, metric string, recv time.Time) (out []buffer.Reading, ignored int, err error) {
	if d.MaxPayload > 0 && len(payload) > d.MaxPayload {
		return dst, 0, rejectf(ReasonPayloadTooLarge, "%d bytes, limit %d", len(payload), d.MaxPayload)
	}
	if format < FormatAuto || format > FormatValue {
		return dst, 0, fmt.Errorf("decode: unknown payload format %d", int(format))
	}
	if device != "" {
		if prob := checkName(device, MaxDeviceLen); prob != "" {
			return dst, 0, rejectf(ReasonBadDevice, "device %s from topic: %s", quote(device), prob)
		}
	}
	start := skipSpace(payload, 0)
	if start == len(payload) {
		return dst, 0, &RejectError{Reason: ReasonEmptyPayload}
	}
	if format == FormatJSON || format == FormatAuto && payload[start] == '{' {
		return d.decodeJSON(dst, payload, start, device, metric, recv)
	}
	return d.decodeValue(dst, format, payload, start, device, metric, recv)
}

func (d *Decoder) decodeValue(dst []buffer.Reading, format Format, payload []byte, start int, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	end := len(payload)
	for end > start && isSpace(payload[end-1]) {
		end--
	}
	b := payload[start:end]
	var v float64
	switch string(b) {
	case "true":
		v = 1
	case "false":
		v = 0
	default:
		n, ok := scanNumber(b, 0, false)
		if !ok || n.end != len(b) {
			if isNonFiniteWord(b) {
				return dst, 0, rejectf(ReasonNonFinite, "value %s", quote(b))
			}
			what := "a number or boolean"
			if format == FormatAuto {
				what = "a JSON object, number or boolean"
			}
			return dst, 0, rejectf(ReasonInvalidValue, "payload %s is not %s", quote(b), what)
		}
		v = n.float(b, 0)
		if math.IsInf(v, 0) {
			return dst, 0, rejectf(ReasonNonFinite, "value %s overflows float64", quote(b))
		}
	}
	if metric == "" {
		return dst, 0, rejectf(ReasonNoMetric, "a plain value needs %s in the topic", PlaceholderMetric)
	}
	if prob := checkName(metric, MaxMetricLen); prob != "" {
		return dst, 0, rejectf(ReasonBadMetric, "metric %s from topic: %s", quote(metric), prob)
	}
	if device == "" {
		return dst, 0, rejectf(ReasonBadDevice, "no device: a plain value needs %s in the topic", PlaceholderDevice)
	}
	return append(dst, buffer.Reading{Device: device, Metric: metric, TS: recv.UnixNano(), Value: v}), 0, nil
}

func (d *Decoder) decodeJSON(dst []buffer.Reading, payload []byte, start int, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if c := payload[start]; c != '{' {
		what := "not JSON"
		switch {
		case c == '[':
			what = "a JSON array"
		case c == '"':
			what = "a JSON string"
		case c == '-' || isDigit(c):
			what = "a JSON number"
		case c == 't' || c == 'f':
			what = "a JSON boolean"
		case c == 'n':
			what = "JSON null"
		}
		return dst, 0, rejectf(ReasonInvalidJSON, "payload is %s, want a JSON object", what)
	}
	p := jsonParser{d: d, s: payload, i: start, out: dst, topicDevice: device != ""}
	d.path = d.path[:0]
	if err := p.container(1, true); err != nil {
		return dst, 0, err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		return dst, 0, p.unexpected("after top-level object")
	}
	if p.err != nil {
		return dst, 0, p.err
	}
	out := p.out
	if len(out) == len(dst) {
		return dst, 0, rejectf(ReasonNoReadings, "no number or boolean fields (%d ignored)", p.ignored)
	}
	if metric != "" && len(out) == len(dst)+1 && out[len(dst)].Metric == "value" {
		if prob := checkName(metric, MaxMetricLen); prob != "" {
			return dst, 0, rejectf(ReasonBadMetric, "metric %s from topic: %s", quote(metric), prob)
		}
		out[len(dst)].Metric = metric
	}
	if device == "" {
		if device = p.device; device == "" {
			return dst, 0, rejectf(ReasonBadDevice, `no device: topic has no %s and payload no "device" field`, PlaceholderDevice)
		}
	}
	ts := recv.UnixNano()
	if p.tsRank > 0 {
		ts = p.ts
	}
	for k := len(dst); k < len(out); k++ {
		out[k].Device, out[k].TS = device, ts
	}
	return out, p.ignored, nil
}

// intern returns b as a string, allocating only for names not seen lately.
// Only valid names (see checkName) are interned.
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.names[string(b)]; ok {
		return s
	}
	if d.names == nil {
		d.names = make(map[string]string)
	} else if len(d.names) >= maxInterned {
		clear(d.names)
	}
	s := string(b)
	d.names[s] = s
	return s
}

// ValidDevice reports whether s is a valid device id: 1 to MaxDeviceLen
// bytes from NameChars.
func ValidDevice(s string) bool { return checkName(s, MaxDeviceLen) == "" }

// ValidMetric reports whether s is a valid metric name: 1 to MaxMetricLen
// bytes from NameChars.
func ValidMetric(s string) bool { return checkName(s, MaxMetricLen) == "" }

// checkName returns "" if s is a valid name of at most max bytes, else what
// is wrong with it.
func checkName[T ~string | ~[]byte](s T, max int) string {
	if len(s) == 0 {
		return "empty"
	}
	if len(s) > max {
		return fmt.Sprintf("longer than %d bytes", max)
	}
	for i := 0; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return fmt.Sprintf("invalid character %s at offset %d (allowed: A-Z a-z 0-9 _ . : -)", quoteByte(s[i]), i)
		}
	}
	return ""
}

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s []byte, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func isNonFiniteWord(b []byte) bool {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	s := string(b)
	return strings.EqualFold(s, "nan") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity")
}

// quote quotes s for an error detail, shortening it if long.
func quote[T ~string | ~[]byte](s T) string {
	const max = 48
	if len(s) > max {
		return strconv.Quote(string(s[:max])) + "..."
	}
	return strconv.Quote(string(s))
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// jsonParser is a single-pass parser of one JSON object. Syntax errors and
// nesting beyond MaxDepth stop it at once; other problems are kept in err,
// the first one winning, while it goes on checking the syntax, so that
// malformed JSON is always reported as such.
type jsonParser struct {
	d   *Decoder
	s   []byte
	i   int // next byte
	out []buffer.Reading

	ignored     int
	topicDevice bool   // the topic supplied the device
	device      string // from the "device" field
	ts          int64  // from the best timestamp field so far
	tsRank      int    // 0: none; 1 timestamp, 2 time, 3 ts
	emptyKeys   int    // empty keys in d.path
	err         *RejectError
}

func (p *jsonParser) skipSpace() { p.i = skipSpace(p.s, p.i) }

// unexpected reports a syntax error at p.i; ctx says what was being read.
func (p *jsonParser) unexpected(ctx string) *RejectError {
	if p.i >= len(p.s) {
		return rejectf(ReasonInvalidJSON, "unexpected end of input at byte %d", len(p.s))
	}
	return rejectf(ReasonInvalidJSON, "invalid character %s %s at byte %d", quoteByte(p.s[p.i]), ctx, p.i)
}

func (p *jsonParser) fail(err *RejectError) {
	if p.err == nil {
		p.err = err
	}
}

// container parses the object or array at p.s[p.i] at nesting level depth.
// With emit, the members of an object become readings; without, it only
// checks the syntax.
func (p *jsonParser) container(depth int, emit bool) *RejectError {
	if depth > MaxDepth {
		return rejectf(ReasonTooDeep, "nested deeper than %d levels at byte %d", MaxDepth, p.i)
	}
	object := p.s[p.i] == '{'
	end, after := byte(']'), "after array element"
	if object {
		end, after = '}', "after object key:value pair"
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == end {
		p.i++
		return nil
	}
	for {
		var err *RejectError
		if object {
			err = p.member(depth, emit)
		} else {
			err = p.value(depth)
		}
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			p.skipSpace()
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			return nil
		}
		return p.unexpected(after)
	}
}

// value checks the value at p.i inside a container at level depth.
func (p *jsonParser) value(depth int) *RejectError {
	var err *RejectError
	switch c := p.peek(); {
	case c == '{' || c == '[':
		err = p.container(depth+1, false)
	case c == '"':
		_, _, _, err = p.str()
	case c == 't':
		err = p.literal("true")
	case c == 'f':
		err = p.literal("false")
	case c == 'n':
		err = p.literal("null")
	case c == '-' || isDigit(c):
		_, _, err = p.number()
	default:
		err = p.unexpected("looking for beginning of value")
	}
	return err
}

// peek returns the byte at p.i, or 0 at the end of the input.
func (p *jsonParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// member parses the "key": value pair at p.i in an object at level depth,
// turning it into readings with emit.
func (p *jsonParser) member(depth int, emit bool) *RejectError {
	if p.peek() != '"' {
		return p.unexpected("looking for beginning of object key string")
	}
	ks, ke, esc, err := p.str()
	if err != nil {
		return err
	}
	p.skipSpace()
	if p.peek() != ':' {
		return p.unexpected("after object key")
	}
	p.i++
	p.skipSpace()
	if !emit {
		return p.value(depth)
	}
	key := p.s[ks:ke]
	if esc {
		p.d.key = unescape(p.d.key[:0], key)
		key = p.d.key
	}
	if depth == 1 {
		switch string(key) {
		case "ts":
			return p.timestamp(key, 3)
		case "time":
			return p.timestamp(key, 2)
		case "timestamp":
			return p.timestamp(key, 1)
		case "device":
			return p.deviceField()
		}
	}
	switch c := p.peek(); {
	case c == '{':
		n := len(p.d.path)
		if depth > 1 {
			p.d.path = append(p.d.path, '.')
		}
		p.d.path = append(p.d.path, key...)
		if len(key) == 0 {
			p.emptyKeys++
		}
		err = p.container(depth+1, true)
		if len(key) == 0 {
			p.emptyKeys--
		}
		p.d.path = p.d.path[:n]
	case c == '"' || c == '[' || c == 'n':
		p.ignored++
		err = p.value(depth)
	case c == 't' || c == 'f':
		if err = p.value(depth); err == nil && c == 't' {
			p.emit(depth, key, 1, nil)
		} else if err == nil {
			p.emit(depth, key, 0, nil)
		}
	case c == '-' || isDigit(c):
		var n numScan
		var start int
		if n, start, err = p.number(); err == nil {
			p.emit(depth, key, n.float(p.s, start), p.s[start:n.end])
		}
	default:
		err = p.unexpected("looking for beginning of value")
	}
	return err
}

// emit appends the reading key = v (raw is v's text, for messages).
func (p *jsonParser) emit(depth int, key []byte, v float64, raw []byte) {
	if p.err != nil {
		return
	}
	name := key
	if depth > 1 {
		p.d.name = append(append(append(p.d.name[:0], p.d.path...), '.'), key...)
		name = p.d.name
	}
	if len(key) == 0 || p.emptyKeys > 0 {
		p.err = rejectf(ReasonBadMetric, "metric %s: empty key", quote(name))
		return
	}
	metric, known := p.d.names[string(name)] // names in the cache are valid
	if !known {
		if prob := checkName(name, MaxMetricLen); prob != "" {
			p.err = rejectf(ReasonBadMetric, "metric %s: %s", quote(name), prob)
			return
		}
		metric = p.d.intern(name)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		p.err = rejectf(ReasonNonFinite, "metric %s: %s overflows float64", quote(name), quote(raw))
		return
	}
	p.out = append(p.out, buffer.Reading{Metric: metric, Value: v})
}

// timestamp handles the value of a top-level timestamp field; rank orders
// the timestamp fields by precedence.
func (p *jsonParser) timestamp(key []byte, rank int) *RejectError {
	var (
		ns   int64
		prob string
		raw  []byte
	)
	switch c := p.peek(); {
	case c == '"':
		s, e, esc, err := p.str()
		if err != nil {
			return err
		}
		raw = p.s[s:e]
		if esc {
			p.d.str = unescape(p.d.str[:0], raw)
			raw = p.d.str
		}
		ns, prob = parseISOTime(raw)
	case c == '-' || isDigit(c):
		n, start, err := p.number()
		if err != nil {
			return err
		}
		raw = p.s[start:n.end]
		ns, prob = epochNanos(n)
	default:
		start := p.i
		if err := p.value(1); err != nil {
			return err
		}
		raw = p.s[start:p.i]
		prob = "want an RFC 3339 string or an epoch number"
	}
	if prob != "" {
		p.fail(rejectf(ReasonBadTimestamp, "field %q = %s: %s", key, quote(raw), prob))
		return nil
	}
	if rank >= p.tsRank {
		p.ts, p.tsRank = ns, rank
	}
	return nil
}

// deviceField handles the value of the top-level "device" field.
func (p *jsonParser) deviceField() *RejectError {
	if p.topicDevice || p.peek() != '"' {
		if err := p.value(1); err != nil {
			return err
		}
		if p.topicDevice {
			p.ignored++
		} else {
			p.fail(rejectf(ReasonBadDevice, `field "device": want a string`))
		}
		return nil
	}
	s, e, esc, err := p.str()
	if err != nil {
		return err
	}
	b := p.s[s:e]
	if esc {
		p.d.str = unescape(p.d.str[:0], b)
		b = p.d.str
	}
	if prob := checkName(b, MaxDeviceLen); prob != "" {
		p.fail(rejectf(ReasonBadDevice, "device %s: %s", quote(b), prob))
		return nil
	}
	p.device = p.d.intern(b)
	return nil
}

func (p *jsonParser) literal(lit string) *RejectError {
	for k := 0; k < len(lit); k++ {
		if p.i >= len(p.s) || p.s[p.i] != lit[k] {
			return p.unexpected("in literal " + lit)
		}
		p.i++
	}
	return nil
}

// number scans the JSON number at p.i; start is where it began.
func (p *jsonParser) number() (n numScan, start int, err *RejectError) {
	start = p.i
	n, ok := scanNumber(p.s, p.i, true)
	p.i = n.end
	if !ok {
		return n, start, p.unexpected("in numeric literal")
	}
	return n, start, nil
}

// str scans the string at p.s[p.i] == '"', checking escapes and rejecting
// control characters, and returns the bounds of its contents and whether
// they contain escapes. Invalid UTF-8 is let through, as encoding/json does.
func (p *jsonParser) str() (start, end int, esc bool, err *RejectError) {
	s, i := p.s, p.i+1
	start = i
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			p.i = i + 1
			return start, i, esc, nil
		case c < 0x20:
			p.i = i
			return 0, 0, false, p.unexpected("in string literal")
		case c == '\\':
			esc = true
			i++
			switch {
			case i < len(s) && strings.IndexByte(`"\/bfnrt`, s[i]) >= 0:
			case i < len(s) && s[i] == 'u':
				for k := 0; k < 4; k++ {
					if i++; i >= len(s) || !isHex(s[i]) {
						p.i = i
						return 0, 0, false, p.unexpected(`in \u hexadecimal character escape`)
					}
				}
			default:
				p.i = i
				return 0, 0, false, p.unexpected("in string escape code")
			}
		}
	}
	p.i = i
	return 0, 0, false, p.unexpected("")
}

func isHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v)
}

// unescape appends the contents of a checked JSON string to dst, decoding
// escapes like encoding/json: a \u escape that is half a surrogate pair
// without its other half becomes U+FFFD.
func unescape(dst, src []byte) []byte {
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if k := strings.IndexByte("bfnrt", src[i]); k >= 0 {
			dst = append(dst, "\b\f\n\r\t"[k])
			continue
		} else if src[i] != 'u' { // '"', '\\' or '/'
			dst = append(dst, src[i])
			continue
		}
		r := hex4(src[i+1:])
		i += 4
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if i+6 < len(src) && src[i+1] == '\\' && src[i+2] == 'u' {
				r2 = hex4(src[i+3:])
			}
			if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
				i += 6
			}
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// numScan describes a scanned number. When exact, its value is
// ±mant·10^exp.
type numScan struct {
	end   int // index after the number, or of the offending byte
	neg   bool
	exact bool
	mant  uint64
	exp   int
}

// scanNumber scans a number at s[i:]. strict selects the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; otherwise a leading '+',
// leading zeros, ".5" and "5." are accepted too. It stops at the first byte
// that cannot continue the number; ok is false if what it read is not a
// number, with n.end at the offending byte.
func scanNumber(s []byte, i int, strict bool) (n numScan, ok bool) {
	var (
		mant       uint64
		exp, nd    int // nd: significant digits in mant
		intDigits  int
		fracDigits int
		exact      = true
	)
	if i < len(s) && (s[i] == '-' || !strict && s[i] == '+') {
		n.neg = s[i] == '-'
		i++
	}
	if strict && i < len(s) && s[i] == '0' {
		i++
		intDigits = 1
		if i < len(s) && isDigit(s[i]) { // leading zero
			n.end = i
			return n, false
		}
	} else {
		for ; i < len(s); i++ {
			d := s[i] - '0'
			if d > 9 {
				break
			}
			intDigits++
			if nd < 19 {
				mant = mant*10 + uint64(d)
				if mant != 0 {
					nd++
				}
			} else {
				exp++
				exact = exact && d == 0
			}
		}
	}
	if strict && intDigits == 0 {
		n.end = i
		return n, false
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s); i++ {
			d := s[i] - '0'
			if d > 9 {
				break
			}
			fracDigits++
			if nd < 19 {
				mant = mant*10 + uint64(d)
				if mant != 0 {
					nd++
				}
				exp--
			} else {
				exact = exact && d == 0
			}
		}
		if fracDigits == 0 && (strict || intDigits == 0) {
			n.end = i
			return n, false
		}
	}
	if intDigits == 0 && fracDigits == 0 {
		n.end = i
		return n, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		e, ed := 0, 0
		for ; i < len(s) && isDigit(s[i]); i++ {
			ed++
			if e < 1e6 {
				e = e*10 + int(s[i]-'0')
			}
		}
		if ed == 0 {
			n.end = i
			return n, false
		}
		if neg {
			e = -e
		}
		exp += e
	}
	n.end, n.mant, n.exp, n.exact = i, mant, exp, exact
	return n, true
}

// float returns the value of the number n scanned from s[start:]. Small
// exact values take a fast path that is correctly rounded (both operands are
// exact in float64); others go to strconv. Overflow gives ±Inf.
func (n numScan) float(s []byte, start int) float64 {
	var f float64
	switch {
	case n.mant == 0 && n.exact:
		f = 0
	case n.exact && n.mant <= 1<<53 && n.exp >= -22 && n.exp <= 22:
		f = float64(n.mant)
		if n.exp >= 0 {
			f *= math.Pow10(n.exp)
		} else {
			f /= math.Pow10(-n.exp)
		}
	default:
		f, _ = strconv.ParseFloat(string(s[start:n.end]), 64)
		return f // strconv applied the sign
	}
	if n.neg {
		f = -f
	}
	return f
}

// epochNanos converts a scanned non-negative number to nanoseconds since the
// epoch, choosing the unit by magnitude (see EpochMillisFrom). It truncates
// below a nanosecond and is exact: the 19 significant digits a numScan keeps
// reach below a nanosecond for every time in range. It returns a problem on
// failure.
func epochNanos(n numScan) (int64, string) {
	if n.mant == 0 {
		return 0, ""
	}
	if n.neg {
		return 0, "negative epoch time"
	}
	ip, ok := floorScaled(n.mant, n.exp)
	if !ok {
		return 0, "epoch time out of range"
	}
	digits := 9 // seconds
	switch {
	case ip >= EpochNanosFrom:
		digits = 0
	case ip >= EpochMicrosFrom:
		digits = 3
	case ip >= EpochMillisFrom:
		digits = 6
	}
	ns, ok := floorScaled(n.mant, n.exp+digits)
	if !ok || ns > math.MaxInt64 {
		return 0, "epoch time out of range"
	}
	return int64(ns), ""
}

// floorScaled returns ⌊m·10^e⌋ for m < 10^19, or false if that overflows.
func floorScaled(m uint64, e int) (uint64, bool) {
	switch {
	case e < -19:
		return 0, true
	case e < 0:
		return m / pow10u(-e), true
	case e > 19:
		return 0, false
	}
	hi, lo := bits.Mul64(m, pow10u(e))
	return lo, hi == 0
}

// pow10u returns 10^k for 0 <= k <= 19.
func pow10u(k int) uint64 {
	p := uint64(1)
	for ; k > 0; k-- {
		p *= 10
	}
	return p
}

// parseISOTime parses an RFC 3339 / ISO 8601 date-time,
// YYYY-MM-DD[Tt ]hh:mm:ss[.fraction][Z|z|±hh:mm|±hhmm], to nanoseconds since
// the epoch; without a zone the time is UTC. Fractions beyond nanoseconds are
// truncated. It returns a problem on failure.
func parseISOTime(b []byte) (int64, string) {
	const syntax = "want an RFC 3339 time such as 2026-11-22T10:00:00Z"
	num := func(lo, hi int) int {
		v := 0
		for k := lo; k < hi; k++ {
			if k >= len(b) || !isDigit(b[k]) {
				return -1
			}
			v = v*10 + int(b[k]-'0')
		}
		return v
	}
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[13] != ':' || b[16] != ':' ||
		b[10] != 'T' && b[10] != 't' && b[10] != ' ' {
		return 0, syntax
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, min, sec := num(11, 13), num(14, 16), num(17, 19)
	if year < 0 || month < 0 || day < 0 || hour < 0 || min < 0 || sec < 0 {
		return 0, syntax
	}
	i, frac := 19, 0
	if i < len(b) && b[i] == '.' {
		n := 0
		for i++; i < len(b) && isDigit(b[i]); i++ {
			if n < 9 {
				frac = frac*10 + int(b[i]-'0')
			}
			n++
		}
		if n == 0 {
			return 0, syntax
		}
		for ; n < 9; n++ {
			frac *= 10
		}
	}
	offset := 0
	if i < len(b) {
		switch b[i] {
		case 'Z', 'z':
			i++
		case '+', '-':
			neg, n := b[i] == '-', 5 // ±hhmm
			oh, om := num(i+1, i+3), num(i+3, i+5)
			if i+3 < len(b) && b[i+3] == ':' { // ±hh:mm
				om, n = num(i+4, i+6), 6
			}
			if oh < 0 || om < 0 || oh > 23 || om > 59 {
				return 0, syntax
			}
			if offset = (oh*60 + om) * 60; neg {
				offset = -offset
			}
			i += n
		default:
			return 0, syntax
		}
	}
	if i != len(b) {
		return 0, syntax
	}
	t := time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC)
	if month < 1 || int(t.Month()) != month || t.Day() != day || hour > 23 || min > 59 || sec > 59 {
		return 0, "date or time field out of range"
	}
	switch secs := t.Unix() - int64(offset); {
	case secs < 0:
		return 0, "time before 1970"
	case secs > math.MaxInt64/int64(1e9) || secs == math.MaxInt64/int64(1e9) && int64(frac) > math.MaxInt64%int64(1e9):
		return 0, "time after 2262"
	default:
		return secs*1e9 + int64(frac), ""
	}
}
