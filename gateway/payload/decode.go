package payload

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// Format selects how Decode interprets a payload.
type Format int

const (
	// FormatAuto tells the formats apart by the payload's first byte
	// after whitespace: '{' is a JSON object; '[' is a SenML pack if its
	// first element is an object with a "bn" or "n" key, else a JSON array
	// of objects; anything else is line protocol if it holds an '=' (a
	// line always has one in its field set, a plain value never), else a
	// plain value.
	FormatAuto Format = iota
	// FormatJSON decodes the payload as one JSON object or a JSON array of
	// objects.
	FormatJSON
	// FormatValue decodes the payload as one plain value.
	FormatValue
	// FormatSenML decodes the payload as a SenML pack (RFC 8428, JSON).
	FormatSenML
	// FormatInflux decodes the payload as InfluxDB line protocol, the name
	// uplink.format gives the same syntax.
	FormatInflux

	lastFormat = FormatInflux
)

// formatNames are the names ParseFormat accepts, by Format.
var formatNames = [...]string{FormatAuto: "auto", FormatJSON: "json", FormatValue: "value", FormatSenML: "senml", FormatInflux: "influx"}

// ParseFormat parses "auto", "json", "value", "senml" or "influx".
func ParseFormat(s string) (Format, error) {
	for f, name := range formatNames {
		if s == name {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("unknown payload format %q (want auto, json, value, senml or influx)", s)
}

// String returns the name ParseFormat accepts for f.
func (f Format) String() string {
	if f >= FormatAuto && f <= lastFormat {
		return formatNames[f]
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Reasons for which Decode rejects a message; RejectError.Reason is one of
// these. They are stable and suitable as metric label values.
// ReasonTextTooLong and ReasonInvalidText are also the reasons of a field
// left out of a message whose other readings are kept (Decoder.Dropped).
const (
	ReasonPayloadTooLarge = "payload_too_large" // payload longer than Decoder.MaxPayload
	ReasonEmptyPayload    = "empty_payload"     // payload empty or only whitespace
	ReasonInvalidJSON     = "invalid_json"      // malformed JSON, or JSON that is not an object or array of objects
	ReasonInvalidSenML    = "invalid_senml"     // valid JSON that is not a SenML pack cairn can read
	ReasonInvalidLine     = "invalid_line"      // malformed line protocol
	ReasonTooDeep         = "too_deep"          // JSON nested deeper than MaxDepth
	ReasonNonFinite       = "non_finite"        // number that overflows float64, or NaN/Inf text
	ReasonBadTimestamp    = "bad_timestamp"     // time field present but unusable
	ReasonBadDevice       = "bad_device"        // device id missing or not a valid name
	ReasonBadMetric       = "bad_metric"        // metric name not a valid name
	ReasonNoMetric        = "no_metric"         // plain value but no {metric} in the topic
	ReasonNoReadings      = "no_readings"       // no reading and no missing value (see Decode)
	ReasonTextTooLong     = "text_too_long"     // a text value longer than encoding.MaxText bytes
	ReasonInvalidText     = "invalid_text"      // a text value that is not UTF-8, or holds a control character
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

// Limits on payload structure. Names are checked by the store's own rule
// (encoding.CheckDevice, encoding.CheckMetric, encoding.CheckName), which
// Writer.Submit enforces too, with its limits (encoding.MaxDeviceLen,
// encoding.MaxMetricLen, encoding.MaxUnitLen).
const (
	// MaxDepth is the deepest JSON nesting Decode accepts: the payload
	// object is level 1, and every object or array inside it adds one.
	MaxDepth = 16
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

// The placeholders of a topic pattern (gateway.ParsePattern) that give a
// message's device and metric, for messages.
const (
	placeholderDevice = "{device}"
	placeholderMetric = "{metric}"
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
	// Units, if not nil, gives the units of readings that come without
	// one, and learns those that messages give for other messages'
	// readings (see DecodeRoute).
	Units Units

	names     map[string]string // interned names
	texts     map[string]string // interned texts
	dropped   []RejectError     // fields the last Decode left out, see Dropped
	vtext     []byte            // SenML vs value
	key       []byte            // unescaped object key
	str       []byte            // unescaped string value
	path      []byte            // dotted keys of the enclosing objects
	name      []byte            // metric name being built
	base      []byte            // SenML base name; line protocol measurement
	bunit     []byte            // SenML base unit
	rname     []byte            // SenML record name; line protocol device tag
	runit     []byte            // SenML record unit
	restamped int               // readings of the last Decode given recv, see Restamped
	doc       document          // the payload flattened, for presets and mappings
	zone      *time.Location    // of times without an offset (nil: UTC)
	lineTags  bool              // line protocol tags other than host name the series (telegraf)
	deviceTag string            // with lineTags, the tag that names the device ("": host)
	tags      []byte            // a line's other tags, k=v,k=v
	// relLo and relHi bound the times of the last Decode's readings that
	// are relative to recv (SenML), when relN > 0.
	relLo, relHi int64
	relN         int
}

// Relative reports the range of the times, in the last call to Decode,
// that were relative to the receive time (SenML times below 2**28 s): like
// a time stamped with recv, they say nothing of the gateway's clock and
// are as wrong as it is.
func (d *Decoder) Relative() (lo, hi int64, ok bool) { return d.relLo, d.relHi, d.relN > 0 }

// relative counts a time ts relative to the receive time.
func (d *Decoder) relative(ts int64) {
	if d.relN == 0 || ts < d.relLo {
		d.relLo = ts
	}
	if d.relN == 0 || ts > d.relHi {
		d.relHi = ts
	}
	d.relN++
}

// Restamped returns how many readings the last call to Decode stamped with
// the receive time instead of their device's time, because that time was
// before 2000: the device's clock had never been set.
func (d *Decoder) Restamped() int { return d.restamped }

// Decode decodes the payload of one MQTT message and appends its readings
// to dst. device and metric are the values the topic's {device} and
// {metric} placeholders captured, "" where the pattern had none. recv is the
// time the message was received; it is the reading time unless the payload
// carries one.
//
// On success out is dst with the readings appended and ignored counts the
// fields skipped on purpose: a JSON field named unit, missing values, JSON
// arrays inside an object (each counted once, whatever it contains), SenML
// data values and sums, and a payload "device" field that the topic's
// {device} overrides. On failure err is a *RejectError, out is dst unchanged
// and ignored is 0: a message is stored whole or not at all, but for text
// fields that cannot be a reading's text, left out under their own reason
// (see Dropped). An unknown format yields an error that is not a
// *RejectError.
//
// Values are read the same way in every format. Numbers and booleans are
// values; so is text (a JSON or SenML string, a line protocol string field,
// a plain payload) that is a decimal number ("23.5"), or a state word: true,
// on and open are 1, false, off and closed are 0, in any case. A number
// read from a state word or a boolean keeps its word (buffer.Reading.Word,
// as the device wrote it, see parseText): the store keeps the word as a
// text in a text series, and DecodeRoute makes it a text on a route whose
// Texts name its metric. Text that
// says there is no value now — empty, nan, none, null, unavailable,
// unknown, in any case — and JSON null are missing values: they give no
// reading and are counted in ignored. Any other text is a text reading
// (buffer.Reading.Text, Value 0; see text.go). A message with no reading
// is rejected with no_readings, unless it had a missing value or a field
// left out: a device that reports "unavailable" sent a valid message, and
// it is settled with no reading and no error (out is dst, ignored > 0).
//
// A time from the device before 2000 is replaced by recv (see Restamped);
// a time before 1970 or after 2262 is bad_timestamp.
//
// The formats, and which one auto picks, are described by decodeJSON,
// decodeValue, decodeSenML and decodeInflux. Device ids and metric names
// must be valid names (encoding.CheckDevice, encoding.CheckMetric);
// values must be finite.
func (d *Decoder) Decode(dst []buffer.Reading, format Format, payload []byte, device, metric string, recv time.Time) (out []buffer.Reading, ignored int, err error) {
	if format < FormatAuto || format > lastFormat {
		return dst, 0, fmt.Errorf("decode: unknown payload format %d", int(format))
	}
	if err := d.begin(payload, device); err != nil {
		return dst, 0, err
	}
	start := skipSpace(payload, 0)
	if format == FormatAuto {
		format = detectFormat(payload, start)
	}
	if start == len(payload) && format != FormatValue {
		return dst, 0, &RejectError{Reason: ReasonEmptyPayload}
	}
	switch format {
	case FormatJSON:
		out, ignored, err = d.decodeJSON(dst, payload, start, device, metric, recv)
	case FormatSenML:
		out, ignored, err = d.decodeSenML(dst, payload, start, device, metric, recv)
	case FormatInflux:
		out, ignored, err = d.decodeInflux(dst, payload, device, recv)
	default:
		out, ignored, err = d.decodeValue(dst, payload, start, device, metric, recv)
	}
	if err != nil {
		d.restamped, d.relN, d.dropped = 0, 0, d.dropped[:0]
	}
	return out, ignored, err
}

// begin starts decoding a message: it resets the counts of the last one,
// and rejects a payload over MaxPayload and a device from the topic that
// is not a valid name.
func (d *Decoder) begin(payload []byte, device string) *RejectError {
	d.restamped, d.relN = 0, 0
	d.dropped = d.dropped[:0]
	if d.MaxPayload > 0 && len(payload) > d.MaxPayload {
		return rejectf(ReasonPayloadTooLarge, "%d bytes, limit %d", len(payload), d.MaxPayload)
	}
	if device != "" {
		if prob := encoding.CheckDevice(device); prob != "" {
			return rejectf(ReasonBadDevice, "device %s from topic: %s", quote(device), prob)
		}
	}
	return nil
}

// detectFormat returns the format auto picks for payload, whose first
// non-whitespace byte is at start (see FormatAuto).
func detectFormat(payload []byte, start int) Format {
	if start == len(payload) {
		return FormatValue
	}
	switch payload[start] {
	case '{':
		return FormatJSON
	case '[':
		if looksLikeSenML(payload, start) {
			return FormatSenML
		}
		return FormatJSON
	}
	for _, c := range payload[start:] {
		if c == '=' {
			return FormatInflux
		}
	}
	return FormatValue
}

// looksLikeSenML reports whether the JSON array at payload[start] begins
// with an object that has a "bn" or "n" key at its top level. It only
// looks; the decoder checks the syntax.
func looksLikeSenML(payload []byte, start int) bool {
	p := jsonParser{s: payload, i: start + 1}
	p.skipSpace()
	if p.peek() != '{' {
		return false
	}
	p.i++
	for {
		p.skipSpace()
		if p.peek() != '"' {
			return false
		}
		ks, ke, _, err := p.str()
		if err != nil {
			return false
		}
		if k := string(payload[ks:ke]); k == "bn" || k == "n" {
			return true
		}
		p.skipSpace()
		if p.peek() != ':' {
			return false
		}
		p.i++
		p.skipSpace()
		if p.value(2) != nil {
			return false
		}
		p.skipSpace()
		if p.peek() != ',' {
			return false
		}
		p.i++
	}
}

// decodeValue decodes a plain payload (format value, or auto for a payload
// that is neither JSON nor line protocol): one value, read like any text
// value (see Decode) with surrounding whitespace, such as "21.5", "-3",
// "+1e3", ".5", "007", "true" or "ON", or else a text ("heat", "home").
// It yields one reading named by the topic's {metric} (no_metric if there
// is none) at time recv. An empty payload, or a missing-value word such as
// "unavailable", gives no reading and counts one ignored field. A text
// that cannot be a reading's (see text.go) rejects the message with its
// reason, text_too_long or invalid_text.
func (d *Decoder) decodeValue(dst []buffer.Reading, payload []byte, start int, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	b := payload[start:]
	v, kind, word := parseText(b)
	if kind == textNonFinite {
		return dst, 0, rejectf(ReasonNonFinite, "value %s", quote(b))
	}
	if metric == "" {
		return dst, 0, rejectf(ReasonNoMetric, "a plain value needs %s in the topic", placeholderMetric)
	}
	if prob := encoding.CheckName(metric, encoding.MaxMetricLen); prob != "" {
		return dst, 0, rejectf(ReasonBadMetric, "metric %s from topic: %s", quote(metric), prob)
	}
	if device == "" {
		return dst, 0, rejectf(ReasonBadDevice, "no device: a plain value needs %s in the topic", placeholderDevice)
	}
	switch kind {
	case textMissing:
		return dst, 1, nil
	case textOther:
		t := trimText(b)
		if reason, detail := checkText(t); reason != "" {
			return dst, 0, rejectf(reason, "payload %s: %s", quote(t), detail)
		}
		r, _ := d.textReading(device, metric, recv.UnixNano(), t)
		return append(dst, r), 0, nil
	}
	return append(dst, buffer.Reading{Device: device, Metric: metric, TS: recv.UnixNano(), Value: v, Word: word}), 0, nil
}

// decodeJSON decodes a payload that must be strict JSON (RFC 8259): one
// object, or an array of objects, each of which is decoded as if it were
// the whole payload (its own device and time), and counts as level 1 for
// MaxDepth.
//   - Each number field is a reading named by its key; keys of nested
//     objects are joined with '.' ({"env":{"t":1}} gives metric "env.t").
//     true and false are readings of 1 and 0; strings are read as values
//     (see Decode), or else are text readings, but for a field named unit,
//     ignored. Nulls are missing values; arrays are ignored (but must be
//     valid JSON). Every occurrence of a key counts.
//   - Top-level fields named epoch, ts, time and timestamp, in any case,
//     give the reading time (if several are present, that order is their
//     precedence: an epoch number leaves no doubt about the zone, where
//     some devices send a local time without one). The value is an RFC
//     3339 / ISO 8601 string, "2026-11-22T10:00:00Z", optionally with
//     fractional seconds, a ±hh:mm or ±hhmm offset instead of Z, a space
//     or 't' instead of 'T', or no zone at all meaning UTC; or it is a
//     non-negative epoch number, or a string holding one, whose unit
//     follows from its magnitude (see EpochMillisFrom), fractions allowed.
//     Anything else, or a time before 1970 or after 2262, rejects the
//     message with bad_timestamp.
//   - The device is the topic's {device}. Without one, it is the top-level
//     "device" field, which must then be a string; with one, a "device"
//     field is ignored and counted.
//   - If the topic has {metric} and the object's only number reading comes
//     from a top-level "value" field, as in {"value":21.5,"unit":"C"}, or
//     it has no number and its only reading is a text "value", that
//     reading is named by {metric}. Otherwise {metric} is not used.
func (d *Decoder) decodeJSON(dst []buffer.Reading, payload []byte, start int, device, metric string, recv time.Time) ([]buffer.Reading, int, error) {
	if c := payload[start]; c != '{' && c != '[' {
		return dst, 0, rejectf(ReasonInvalidJSON, "payload is %s, want a JSON object or array of objects", jsonKind(c))
	}
	p := jsonParser{d: d, s: payload, i: start, out: dst}
	var err *RejectError
	if payload[start] == '{' {
		err = p.object(device, metric, recv)
	} else {
		err = p.array(device, metric, recv)
	}
	if err != nil {
		return dst, 0, err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		if payload[start] == '{' {
			return dst, 0, p.unexpected("after top-level object")
		}
		return dst, 0, p.unexpected("after top-level array")
	}
	if p.err != nil {
		return dst, 0, p.err
	}
	if len(p.out) == len(dst) && p.missing == 0 && len(d.dropped) == 0 {
		return dst, 0, rejectf(ReasonNoReadings, "no values (%d ignored)", p.ignored)
	}
	return p.out, p.ignored, nil
}

// jsonKind names the JSON value that starts with c, for messages.
func jsonKind(c byte) string {
	switch {
	case c == '{':
		return "a JSON object"
	case c == '[':
		return "a JSON array"
	case c == '"':
		return "a JSON string"
	case c == '-' || isDigit(c):
		return "a JSON number"
	case c == 't' || c == 'f':
		return "a JSON boolean"
	case c == 'n':
		return "JSON null"
	}
	return "not JSON"
}

// intern returns b as a string, allocating only for names not seen lately.
// Only valid names (encoding.CheckName) are interned.
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

// internUnit returns the unit b as a string, or "" if it is not a valid
// unit: one longer than encoding.MaxUnitLen, or that is not a name, is
// not a unit and is dropped; the reading is kept without it.
func (d *Decoder) internUnit(b []byte) string {
	if encoding.CheckName(b, encoding.MaxUnitLen) != "" {
		return ""
	}
	return d.intern(b)
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
