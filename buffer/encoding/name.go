package encoding

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Names. Device ids and metric names are parts of every key of their
// series, between separators (Sep), so a name that could break a key must
// never reach one: the separator 0x00, and with it every control
// character, never occurs in a name these functions accept. The store
// refuses a reading whose names they refuse, and the gateway checks with
// the same functions before it gets there.
const (
	// MaxDeviceLen is the longest device id, in bytes.
	MaxDeviceLen = 64
	// MaxMetricLen is the longest metric name, in bytes.
	MaxMetricLen = 128
)

// CheckDevice returns "" if s is a valid device id, else what is wrong
// with it. A device id is a metric name (see CheckName) of at most
// MaxDeviceLen bytes that is not "." or "..", which a URL path would take
// for a step up or none.
func CheckDevice[T ~string | ~[]byte](s T) string {
	if string(s) == "." || string(s) == ".." {
		return "a path step, not a name"
	}
	return CheckName(s, MaxDeviceLen)
}

// CheckMetric returns "" if s is a valid metric name, else what is wrong
// with it.
func CheckMetric[T ~string | ~[]byte](s T) string { return CheckName(s, MaxMetricLen) }

// CheckName returns "" if s is a valid name of 1 to max bytes, else what
// is wrong with it. A name is valid UTF-8 made of printable characters
// (unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space), so "kitchen/door", "Küche Temperatur" and "switch:0.apower"
// are names, and no control character, 0x00 included, is a part of one.
func CheckName[T ~string | ~[]byte](s T, max int) string {
	if len(s) == 0 {
		return "empty"
	}
	if len(s) > max {
		return fmt.Sprintf("longer than %d bytes", max)
	}
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && n <= 1:
			return fmt.Sprintf("not valid UTF-8 at offset %d", i)
		case !unicode.IsPrint(r):
			return fmt.Sprintf("unprintable character %s at offset %d", strconv.QuoteRune(r), i)
		}
		i += n
	}
	return ""
}

// MaxUnitLen is the longest unit the store keeps, in bytes.
const MaxUnitLen = 32

// ValidUnit reports whether s can be the unit of a series (the value of
// a KindUnit key): a name (see CheckName) of 1 to MaxUnitLen bytes. A
// unit longer than that is not cut short (a shortened unit could be
// another unit): the store drops it, as any other unit that is not valid.
func ValidUnit(s string) bool { return CheckName(s, MaxUnitLen) == "" }
