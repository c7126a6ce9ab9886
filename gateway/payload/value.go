package payload

import (
	"math"
	"time"
)

// textKind says what the text of a value, as a device sends it, stands for.
type textKind int

const (
	// textOther is text that is not a value, such as a label or a unit:
	// ignored and counted.
	textOther textKind = iota
	// textNumber is a number or a state word; its value is returned.
	textNumber
	// textMissing is text that says there is no value now, such as
	// "unavailable": no reading, counted like an ignored field, and never
	// a rejection.
	textMissing
	// textNonFinite is inf or infinity, or a number beyond float64.
	textNonFinite
)

// parseText reads the text of a string value, or of a plain payload, the
// way devices write values, after trimming JSON whitespace:
//
//   - a decimal number: "23.5", "-3", "+1e3", ".5", "5.", "007";
//   - true, on and open are 1; false, off and closed are 0: state words,
//     whose word is returned too, as the device wrote it (see spelling);
//   - "" and nan, none, null, unavailable and unknown are missing;
//   - inf and infinity, either with a sign, are non-finite, and so is a
//     number that overflows float64.
//
// Words match in any case (ASCII only). Any other text is other.
func parseText(b []byte) (v float64, kind textKind, word string) {
	start, end := 0, len(b)
	for start < end && isSpace(b[start]) {
		start++
	}
	for end > start && isSpace(b[end-1]) {
		end--
	}
	b = b[start:end]
	if len(b) == 0 {
		return 0, textMissing, ""
	}
	if c := b[0]; c == '+' || c == '-' || c == '.' || isDigit(c) {
		if n, ok := scanNumber(b, 0, false); ok && n.end == len(b) {
			v := n.float(b, 0)
			if math.IsInf(v, 0) {
				return 0, textNonFinite, ""
			}
			return v, textNumber, ""
		}
	}
	if len(b) > 11 { // longer than the longest word
		return 0, textOther, ""
	}
	for i := range textWords {
		w := &textWords[i]
		if asciiEqualFold(b, w.word) {
			if w.kind == textNumber {
				return w.v, w.kind, spelling(b, w)
			}
			return w.v, w.kind, ""
		}
	}
	if c := b[0]; (c == '+' || c == '-') && len(b) > 1 {
		rest := b[1:]
		switch {
		case asciiEqualFold(rest, "nan"):
			return 0, textMissing, ""
		case asciiEqualFold(rest, "inf") || asciiEqualFold(rest, "infinity"):
			return 0, textNonFinite, ""
		}
	}
	return 0, textOther, ""
}

// spelling returns the state word b, which is w.word in some case, as a
// constant, so that a word costs no allocation: the device's own spelling
// when it is w's in lower case, capitalised or in upper case ("off",
// "Off", "OFF"), as devices write them; any other mix of cases in lower
// case.
func spelling(b []byte, w *textWord) string {
	if string(b) == w.word {
		return w.word
	}
	for _, s := range w.spellings {
		if string(b) == s {
			return s
		}
	}
	return w.word
}

// textWord is a word parseText knows: in lower case, what it stands for,
// and for a state word its spellings capitalised and in upper case.
type textWord struct {
	word      string
	v         float64
	kind      textKind
	spellings [2]string
}

// textWords are the words parseText knows.
var textWords = [...]textWord{
	{"true", 1, textNumber, [2]string{"True", "TRUE"}}, {"on", 1, textNumber, [2]string{"On", "ON"}},
	{"open", 1, textNumber, [2]string{"Open", "OPEN"}},
	{"false", 0, textNumber, [2]string{"False", "FALSE"}}, {"off", 0, textNumber, [2]string{"Off", "OFF"}},
	{"closed", 0, textNumber, [2]string{"Closed", "CLOSED"}},
	{"nan", 0, textMissing, [2]string{}}, {"none", 0, textMissing, [2]string{}}, {"null", 0, textMissing, [2]string{}},
	{"unavailable", 0, textMissing, [2]string{}}, {"unknown", 0, textMissing, [2]string{}},
	{"inf", 0, textNonFinite, [2]string{}}, {"infinity", 0, textNonFinite, [2]string{}},
}

// asciiEqualFold reports whether b equals s, ignoring the case of ASCII
// letters only (unlike bytes.EqualFold, the Kelvin sign is not a 'k').
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// MinReadingTime (2000-01-01, in Unix nanoseconds) is the earliest time a
// reading may have: a device's time before it is replaced by the receive
// time (Decoder.Restamped), and a reading before it is absurd.
const MinReadingTime = 946684800 * int64(time.Second)

// restamp returns the time of a reading whose device gave it the time ts:
// ts itself, or recv when ts is before 2000, which only a device whose
// clock was never set sends (a board without a real-time clock counts from
// 1970 until NTP sets it). Called once per reading, it counts the
// readings restamped in d.restamped.
func (d *Decoder) restamp(ts int64, recv time.Time) int64 {
	if ts < MinReadingTime {
		d.restamped++
		return recv.UnixNano()
	}
	return ts
}
