package payload

import (
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// A text value is a string that is not a number, a state word or a
// missing value (parseText's textOther): a mode ("heat"), a state
// ("home"), an event ("single"). It becomes a reading whose Text is the
// string without the whitespace around it and whose Value is 0
// (buffer.Reading.Text). A text longer than encoding.MaxText bytes, or one
// that is not UTF-8 or holds a control character, is no reading: the
// field is left out under the reason ReasonTextTooLong or
// ReasonInvalidText (Decoder.Dropped), and the message's other readings
// are kept.
//
// A state word ("off", "ON") is the number 0 or 1 with its word beside it
// (buffer.Reading.Word), and a text only where its metric is known to be
// one: a route's Texts, a preset's modes (Route.texts), or a series the
// store holds as texts.

// checkText returns the reason the text b cannot be a reading's text, ""
// if it can, and the detail of the problem.
func checkText(b []byte) (reason, detail string) {
	if len(b) > encoding.MaxText {
		return ReasonTextTooLong, "text of " + itoa(len(b)) + " bytes, limit " + itoa(encoding.MaxText)
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return ReasonInvalidText, "text holds the control character " + quoteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return ReasonInvalidText, "text is not valid UTF-8"
		case r >= 0x80 && r <= 0x9f:
			return ReasonInvalidText, "text holds a C1 control character"
		}
		i += n
	}
	return "", ""
}

// trimText returns b without the JSON whitespace around it.
func trimText(b []byte) []byte {
	start, end := 0, len(b)
	for start < end && isSpace(b[start]) {
		start++
	}
	for end > start && isSpace(b[end-1]) {
		end--
	}
	return b[start:end]
}

// text returns the text value b, trimmed, as a reading's Text: interned,
// so that a text that repeats allocates once. If it cannot be one, it
// notes the field metric as dropped (see Dropped) and returns ok false.
// b must be text that parseText calls textOther.
func (d *Decoder) text(metric string, b []byte) (s string, ok bool) {
	b = trimText(b)
	if reason, detail := checkText(b); reason != "" {
		d.drop(reason, "metric "+quote(metric)+": "+detail)
		return "", false
	}
	if s, ok := d.texts[string(b)]; ok {
		return s, true
	}
	if d.texts == nil {
		d.texts = make(map[string]string)
	} else if len(d.texts) >= maxInterned {
		clear(d.texts)
	}
	s = string(b)
	d.texts[s] = s
	return s, true
}

// textReading returns a text reading of metric at ts from the text value
// b, or ok false if b cannot be a text (see text).
func (d *Decoder) textReading(device, metric string, ts int64, b []byte) (r buffer.Reading, ok bool) {
	s, ok := d.text(metric, b)
	if !ok {
		return buffer.Reading{}, false
	}
	return buffer.Reading{Device: device, Metric: metric, TS: ts, Text: s}, true
}

// drop notes a field left out of the message for reason.
func (d *Decoder) drop(reason, detail string) {
	d.dropped = append(d.dropped, RejectError{Reason: reason, Detail: detail})
}

// Dropped returns the fields that the last call to Decode or DecodeRoute
// left out of a message it otherwise decoded, one each, with their reason
// (ReasonTextTooLong, ReasonInvalidText): a text value that cannot be a
// reading's text. They are not counted as ignored. A message that was
// rejected whole has none. The slice is the Decoder's, valid until its
// next call.
func (d *Decoder) Dropped() []RejectError { return d.dropped }

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}
