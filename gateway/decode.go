package gateway

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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
		if prob := checkDevice(device); prob != "" {
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
// bytes from NameChars, and not "." or "..", which a URL path would take
// for a step up or none.
func ValidDevice(s string) bool { return checkDevice(s) == "" }

// checkDevice is checkName for a device id.
func checkDevice[T ~string | ~[]byte](s T) string {
	if string(s) == "." || string(s) == ".." {
		return "a path step, not a name"
	}
	return checkName(s, MaxDeviceLen)
}

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
