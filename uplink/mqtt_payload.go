package uplink

import (
	"fmt"
	"math"
	"strconv"

	"github.com/cairn-gateway/cairn/buffer"
)

// MessageFormat is how an MQTT message carries readings.
type MessageFormat int

const (
	// MessageSenML is a SenML pack (RFC 8428, JSON). Its first record
	// holds the base name "urn:dev:cairn:{gateway}:{device}:" and the
	// base time bt, the first reading's time in whole seconds; each
	// record holds the metric as n, the time relative to bt as t (in
	// seconds, with the nanoseconds as decimals, so exact), the value v
	// (a text reading's text as the string value vs), the unit u when
	// the series has one, and cairn_id, the reading's
	// idempotency id (the id of cairn's JSON, see appendReadingID). A
	// record of another device than the one before it repeats bn.
	// cairn_id is an extension field that need not be understood (its
	// name does not end in '_', RFC 8428 §4.4): a SenML reader that does
	// not know it ignores it. Readings whose device or metric holds a
	// character a SenML name may not (SenMLName), or whose time is before
	// 1978-07-04 (2**28 s, which SenML reads as relative to now), are
	// skipped.
	MessageSenML MessageFormat = iota + 1
	// MessageInflux is InfluxDB line protocol, one line per reading,
	// written as the HTTP upstreams write it (Influx), a text reading as
	// a string field; one whose text holds a line break is skipped.
	MessageInflux
)

// ParseMessageFormat parses the name of a MessageFormat.
func ParseMessageFormat(s string) (MessageFormat, error) {
	switch s {
	case "senml":
		return MessageSenML, nil
	case "influx":
		return MessageInflux, nil
	}
	return 0, fmt.Errorf("must be senml or influx (got %q)", s)
}

func (f MessageFormat) String() string {
	switch f {
	case MessageSenML:
		return "senml"
	case MessageInflux:
		return "influx"
	}
	return fmt.Sprintf("MessageFormat(%d)", int(f))
}

// senmlBaseRelative is the smallest SenML time, in seconds, that is not
// relative to the time of reading (RFC 8428 §4.5.3).
const senmlBaseRelative = 1 << 28

// Message is one message body of MessageEncoder.Split, or a reading that
// fits in none.
type Message struct {
	// Body is the message's payload; nil when Err is set.
	Body []byte
	// Readings are the run of the input (a part of Split's rs) this
	// message stands for: the readings it carries and those skipped
	// among, before or after them. Together the messages' Readings are
	// rs, in order, unless every reading of rs was skipped.
	Readings []buffer.OutboxReading
	// Err is a *MessageTooLargeError when the last of Readings does not
	// fit in a message of the limit on its own: it is not sent, and the
	// other Readings were skipped.
	Err error
}

// MessageTooLargeError is a reading whose message alone would be larger
// than the limit.
type MessageTooLargeError struct {
	Seq            uint64
	Device, Metric string
	Size, Max      int // bytes
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("reading %d of %s/%s: a message of %d bytes, over the limit of %d", e.Seq, e.Device, e.Metric, e.Size, e.Max)
}

// MessageEncoder writes readings as MQTT message bodies. It is used by
// one goroutine at a time; its scratch buffers are reused.
type MessageEncoder struct {
	format  MessageFormat
	gateway string
	line    *encoder // MessageInflux
	rec     []byte   // the record or line being written
}

// NewMessageEncoder returns an encoder of format f for the gateway
// (which names the SenML base names, and the gateway tag of line
// protocol) and the line protocol measurement (default "readings").
func NewMessageEncoder(f MessageFormat, gateway, measurement string) *MessageEncoder {
	if measurement == "" {
		measurement = "readings"
	}
	return &MessageEncoder{format: f, gateway: gateway, line: newEncoder(Influx, measurement, gateway)}
}

// Split appends to dst the messages that carry rs, in order, each body
// at most maxBytes long (0: no limit), and returns them with the number
// of readings skipped (values that are not finite, names or times the
// format cannot carry). A reading too large for any message is a Message
// with Err set, which the caller counts as refused. A Body is not reused
// by the encoder.
func (e *MessageEncoder) Split(dst []Message, rs []buffer.OutboxReading, maxBytes int) ([]Message, int) {
	skipped := 0
	open, sep, closing := 0, 0, 0 // the bytes around and between records
	if e.format == MessageSenML {
		open, sep, closing = 1, 1, 1 // [ , ]
	}
	var body []byte // the message being written
	start := 0      // index in rs of its first reading
	var bt int64    // its SenML base time, in seconds
	device := ""    // the device of its SenML bn
	flush := func(end int) {
		if body != nil {
			if e.format == MessageSenML {
				body = append(body, ']')
			}
			dst = append(dst, Message{Body: body, Readings: rs[start:end]})
			body, start = nil, end
		}
	}
	for i := range rs {
		r := &rs[i]
		if !e.fits(r) {
			skipped++
			continue
		}
		rec := e.record(rs[i:i+1], body == nil, bt, device)
		if body != nil && maxBytes > 0 && len(body)+sep+len(rec)+closing > maxBytes {
			flush(i)
			rec = e.record(rs[i:i+1], true, 0, "")
		}
		if body == nil {
			if size := open + len(rec) + closing; maxBytes > 0 && size > maxBytes {
				dst = append(dst, Message{Readings: rs[start : i+1], Err: &MessageTooLargeError{
					Seq: r.Seq, Device: r.Device, Metric: r.Metric, Size: size, Max: maxBytes}})
				start = i + 1
				continue
			}
			// Room for the rest of rs, if its records are as long as
			// this one, up to the limit.
			size := open + len(rec)*(len(rs)-i) + closing
			if maxBytes > 0 {
				size = min(size, maxBytes)
			}
			body = make([]byte, 0, size)
			if e.format == MessageSenML {
				body = append(body, '[')
				bt = r.TS / 1e9
			}
		} else if e.format == MessageSenML {
			body = append(body, ',')
		}
		body = append(body, rec...)
		device = r.Device
	}
	flush(len(rs))
	if start < len(rs) && len(dst) > 0 {
		// Readings skipped after the last message go with it.
		m := &dst[len(dst)-1]
		m.Readings = m.Readings[:len(m.Readings)+len(rs)-start]
	}
	return dst, skipped
}

// fits reports whether the format carries r.
func (e *MessageEncoder) fits(r *buffer.OutboxReading) bool {
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		return false
	}
	if e.format == MessageSenML {
		return r.TS >= senmlBaseRelative*1e9 && SenMLName(e.gateway) && SenMLName(r.Device) && SenMLName(r.Metric)
	}
	return WritableName(r.Device) && WritableName(r.Metric) && WritableText(r.Text)
}

// record returns the SenML record or the line of one's one reading, in
// e.rec. The first record of a SenML message holds the base name and the
// base time; a later one holds the base name if its device is not
// device, and its time is relative to bt.
func (e *MessageEncoder) record(one []buffer.OutboxReading, first bool, bt int64, device string) []byte {
	r := &one[0]
	if e.format == MessageInflux {
		b, _ := e.line.influx(one)
		e.rec = append(e.rec[:0], b...)
		return e.rec
	}
	b := append(e.rec[:0], '{')
	if first || r.Device != device {
		b = append(b, `"bn":"urn:dev:cairn:`...)
		b = append(b, e.gateway...)
		b = append(b, ':')
		b = append(b, r.Device...)
		b = append(b, `:",`...)
	}
	if first {
		bt = r.TS / 1e9
		b = append(b, `"bt":`...)
		b = strconv.AppendInt(b, bt, 10)
		b = append(b, ',')
	}
	b = append(b, `"n":"`...)
	b = append(b, r.Metric...)
	b = append(b, `","t":`...)
	b = appendSeconds(b, r.TS-bt*1e9)
	if r.IsText() {
		b = append(b, `,"vs":`...)
		b = appendJSONString(b, r.Text)
	} else {
		b = append(b, `,"v":`...)
		b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
	}
	if r.Unit != "" {
		b = append(b, `,"u":`...)
		b = appendJSONString(b, r.Unit)
	}
	b = append(b, `,"cairn_id":"`...)
	b = appendReadingID(b, r)
	b = append(b, `"}`...)
	e.rec = b
	return b
}

// appendSeconds appends ns nanoseconds as decimal seconds, exactly: no
// fraction when it is whole, else up to 9 decimals without trailing
// zeros.
func appendSeconds(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1e9, 10)
	frac := u % 1e9
	if frac == 0 {
		return b
	}
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 9
	for d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

// SenMLName reports whether s can be a part of the SenML names cairn
// writes (a gateway, a device, a metric): it is not empty and made of
// the characters RFC 8428 §4.5.1 allows in a name, letters, digits and
// -:./_ (which need no escape in JSON). The whole name begins with
// "urn", as a name must begin with a letter or digit.
func SenMLName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != ':' && c != '.' && c != '/' && c != '_' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
