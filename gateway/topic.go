package gateway

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Placeholders that a pattern level may consist of.
const (
	// PlaceholderDevice names the topic level that carries the device id.
	PlaceholderDevice = "{device}"
	// PlaceholderMetric names the topic level that carries the metric name.
	PlaceholderMetric = "{metric}"
)

// maxTopicLen is the longest topic (filter) MQTT can carry, in bytes.
const maxTopicLen = 65535

type levelKind uint8

const (
	levelLiteral levelKind = iota // matches exactly lit
	levelSingle                   // "+": matches any one level, also an empty one
	levelMulti                    // "#": matches the rest, also nothing (last level only)
	levelDevice                   // "{device}": any one non-empty level, captured
	levelMetric                   // "{metric}": any one non-empty level, captured
)

type patternLevel struct {
	kind levelKind
	lit  string // for levelLiteral only
}

// Pattern is a parsed topic pattern: an MQTT topic filter in which a whole
// level may be the placeholder {device} or {metric}, each at most once.
//
// Levels are separated by '/'. Apart from the placeholders a level is either
// literal text (possibly empty, as in MQTT), the single-level wildcard "+",
// or, as the last level only, the multi-level wildcard "#". A placeholder
// matches like "+" except that it never matches an empty level: the value it
// captures is always non-empty.
//
// Match follows the MQTT matching rules: "a/#" also matches "a", and a
// pattern whose first level is a wildcard or placeholder does not match
// topics that start with '$' (such as "$SYS/...").
//
// The zero Pattern matches nothing. A Pattern is immutable and safe for
// concurrent use.
type Pattern struct {
	raw       string
	filter    string
	levels    []patternLevel
	hasDevice bool
	hasMetric bool
}

// ParsePattern parses a topic pattern such as "sensors/{device}/{metric}" or
// "zigbee2mqtt/{device}".
//
// It rejects an empty pattern, one longer than 65535 bytes, one that is not
// valid UTF-8 or contains U+0000, a placeholder other than {device} and
// {metric}, a placeholder that occurs twice, a '{' or '}' that is not part
// of a whole-level placeholder, a '+' or '#' that is not a whole level, and
// a '#' that is not the last level. Errors name the pattern, e.g.
//
//	pattern "a/{dev}/b": unknown placeholder {dev} (want {device} or {metric})
func ParsePattern(s string) (Pattern, error) {
	fail := func(format string, args ...any) (Pattern, error) {
		return Pattern{}, fmt.Errorf("pattern %q: %s", s, fmt.Sprintf(format, args...))
	}
	switch {
	case s == "":
		return fail("empty pattern")
	case len(s) > maxTopicLen:
		return fail("longer than %d bytes", maxTopicLen)
	case !utf8.ValidString(s):
		return fail("not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return fail("contains U+0000")
	}

	p := Pattern{raw: s, levels: make([]patternLevel, 0, strings.Count(s, "/")+1)}
	var filter strings.Builder
	filter.Grow(len(s))
	rest := s
	for i := 0; ; i++ {
		lvl, tail, more := strings.Cut(rest, "/")
		if i > 0 {
			filter.WriteByte('/')
		}
		var l patternLevel
		switch {
		case lvl == PlaceholderDevice:
			if p.hasDevice {
				return fail("%s appears more than once", PlaceholderDevice)
			}
			p.hasDevice = true
			l.kind = levelDevice
			filter.WriteByte('+')
		case lvl == PlaceholderMetric:
			if p.hasMetric {
				return fail("%s appears more than once", PlaceholderMetric)
			}
			p.hasMetric = true
			l.kind = levelMetric
			filter.WriteByte('+')
		case lvl == "+":
			l.kind = levelSingle
			filter.WriteByte('+')
		case lvl == "#":
			if more {
				return fail(`"#" must be the last level`)
			}
			l.kind = levelMulti
			filter.WriteByte('#')
		case len(lvl) >= 2 && lvl[0] == '{' && lvl[len(lvl)-1] == '}' &&
			!strings.ContainsAny(lvl[1:len(lvl)-1], "{}"):
			return fail("unknown placeholder %s (want %s or %s)", lvl, PlaceholderDevice, PlaceholderMetric)
		case strings.ContainsAny(lvl, "{}"):
			return fail("level %q: a placeholder must be a whole level, %s or %s", lvl, PlaceholderDevice, PlaceholderMetric)
		case strings.ContainsAny(lvl, "+#"):
			return fail(`level %q: wildcards "+" and "#" must be a whole level`, lvl)
		default:
			l.kind = levelLiteral
			l.lit = lvl
			filter.WriteString(lvl)
		}
		p.levels = append(p.levels, l)
		if !more {
			break
		}
		rest = tail
	}
	p.filter = filter.String()
	return p, nil
}

// String returns the pattern as it was given to ParsePattern.
func (p Pattern) String() string { return p.raw }

// Filter returns the MQTT subscription filter for the pattern: the pattern
// with each placeholder replaced by "+". For the zero Pattern it is "".
func (p Pattern) Filter() string { return p.filter }

// HasDevice reports whether the pattern contains {device}.
func (p Pattern) HasDevice() bool { return p.hasDevice }

// HasMetric reports whether the pattern contains {metric}.
func (p Pattern) HasMetric() bool { return p.hasMetric }

// Match reports whether the concrete topic name matches the pattern and, if
// it does, returns the levels captured by {device} and {metric}. A value is
// "" exactly when the pattern lacks that placeholder; otherwise it is a
// non-empty substring of topic (Match does not allocate).
//
// A topic that is empty or contains '+', '#' or U+0000 is not a valid topic
// name and matches nothing.
func (p Pattern) Match(topic string) (device, metric string, ok bool) {
	if topic == "" || len(p.levels) == 0 || strings.ContainsAny(topic, "+#\x00") {
		return "", "", false
	}
	if topic[0] == '$' && p.levels[0].kind != levelLiteral {
		return "", "", false
	}
	rest, more := topic, true
	for _, l := range p.levels {
		if l.kind == levelMulti {
			return device, metric, true
		}
		if !more {
			return "", "", false
		}
		var lvl string
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			lvl, rest = rest[:j], rest[j+1:]
		} else {
			lvl, rest, more = rest, "", false
		}
		switch l.kind {
		case levelLiteral:
			if lvl != l.lit {
				return "", "", false
			}
		case levelDevice:
			if lvl == "" {
				return "", "", false
			}
			device = lvl
		case levelMetric:
			if lvl == "" {
				return "", "", false
			}
			metric = lvl
		}
	}
	if more {
		return "", "", false
	}
	return device, metric, true
}
