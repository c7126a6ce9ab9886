package gateway

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Placeholders that a pattern level may consist of.
const (
	// PlaceholderDevice names a topic level that carries the device id, or
	// a part of it: the parts of several are joined with '.'
	// ("homeassistant/{device}/{device}/state" reads the topic
	// "homeassistant/sensor/outside/state" as device "sensor.outside").
	PlaceholderDevice = "{device}"
	// PlaceholderMetric names a topic level that carries the metric name,
	// or a part of it, joined like {device}.
	PlaceholderMetric = "{metric}"
	// PlaceholderDeviceLevels stands for one or more levels that together
	// are the device id, '/' and all ("zigbee2mqtt/{device+}" reads
	// "zigbee2mqtt/kitchen/door" as device "kitchen/door").
	PlaceholderDeviceLevels = "{device+}"
	// PlaceholderMetricLevels stands for one or more levels that together
	// are the metric name, joined with '.' ("shellies/{device}/{metric+}"
	// reads "shellies/plug-1/relay/0/power" as metric "relay.0.power").
	PlaceholderMetricLevels = "{metric+}"
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
	levelDevices                  // "{device+}": one or more non-empty levels, captured
	levelMetrics                  // "{metric+}": one or more non-empty levels, captured
)

type patternLevel struct {
	kind levelKind
	lit  string // for levelLiteral only
}

// Pattern is a parsed topic pattern: an MQTT topic filter in which a whole
// level may be a placeholder that captures the device id or the metric
// name: {device} or {metric} (one level each, a part of the name, may
// occur more than once), or {device+} or {metric+} (one or more levels).
//
// Levels are separated by '/'. Apart from the placeholders a level is either
// literal text (possibly empty, as in MQTT), the single-level wildcard "+",
// or, as the last level only, the multi-level wildcard "#". A placeholder
// matches like "+" except that it never matches an empty level: the value it
// captures is always non-empty. A pattern has at most one multi-level part
// ({device+}, {metric+} or "#"), so that a topic matches it in one way only.
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
	multi     int // index of the {device+} or {metric+} level, or -1
}

// ParsePattern parses a topic pattern such as "sensors/{device}/{metric}" or
// "zigbee2mqtt/{device+}".
//
// It rejects an empty pattern, one longer than 65535 bytes, one that is not
// valid UTF-8 or contains U+0000, an unknown placeholder, {device} with
// {device+} or {metric} with {metric+}, more than one multi-level part, a
// '{' or '}' that is not part of a whole-level placeholder, a '+' or '#'
// that is not a whole level, and a '#' that is not the last level. Errors
// name the pattern, e.g.
//
//	pattern "a/{dev}/b": unknown placeholder {dev} (want {device}, {metric}, {device+} or {metric+})
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

	p := Pattern{raw: s, levels: make([]patternLevel, 0, strings.Count(s, "/")+1), multi: -1}
	var filter strings.Builder
	filter.Grow(len(s))
	var devices, metrics, multis int // placeholders seen, multi-level parts
	var deviceLevels, metricLevels bool
	rest := s
	for i := 0; ; i++ {
		lvl, tail, more := strings.Cut(rest, "/")
		if i > 0 && p.multi < 0 {
			filter.WriteByte('/')
		}
		var l patternLevel
		switch {
		case lvl == PlaceholderDevice, lvl == PlaceholderDeviceLevels:
			devices++
			l.kind = levelDevice
			if lvl == PlaceholderDeviceLevels {
				deviceLevels, l.kind = true, levelDevices
			}
		case lvl == PlaceholderMetric, lvl == PlaceholderMetricLevels:
			metrics++
			l.kind = levelMetric
			if lvl == PlaceholderMetricLevels {
				metricLevels, l.kind = true, levelMetrics
			}
		case lvl == "+":
			l.kind = levelSingle
		case lvl == "#":
			if more {
				return fail(`"#" must be the last level`)
			}
			l.kind = levelMulti
			multis++
		case len(lvl) >= 2 && lvl[0] == '{' && lvl[len(lvl)-1] == '}' &&
			!strings.ContainsAny(lvl[1:len(lvl)-1], "{}"):
			return fail("unknown placeholder %s (want %s, %s, %s or %s)", lvl, PlaceholderDevice, PlaceholderMetric, PlaceholderDeviceLevels, PlaceholderMetricLevels)
		case strings.ContainsAny(lvl, "{}"):
			return fail("level %q: a placeholder must be a whole level", lvl)
		case strings.ContainsAny(lvl, "+#"):
			return fail(`level %q: wildcards "+" and "#" must be a whole level`, lvl)
		default:
			l.kind = levelLiteral
			l.lit = lvl
		}
		if l.kind == levelDevices || l.kind == levelMetrics {
			multis++
			if p.multi < 0 {
				p.multi = len(p.levels)
				filter.WriteByte('#')
			}
		} else if p.multi < 0 {
			switch l.kind {
			case levelLiteral:
				filter.WriteString(lvl)
			case levelMulti:
				filter.WriteByte('#')
			default:
				filter.WriteByte('+')
			}
		}
		p.levels = append(p.levels, l)
		if !more {
			break
		}
		rest = tail
	}
	switch {
	case deviceLevels && devices > 1:
		return fail("%s is the whole device id: it cannot be joined with another device placeholder", PlaceholderDeviceLevels)
	case metricLevels && metrics > 1:
		return fail("%s is the whole metric name: it cannot be joined with another metric placeholder", PlaceholderMetricLevels)
	case multis > 1:
		return fail(`at most one of %s, %s and "#" may appear: a topic must match in one way only`, PlaceholderDeviceLevels, PlaceholderMetricLevels)
	}
	p.hasDevice, p.hasMetric = devices > 0, metrics > 0
	p.filter = filter.String()
	return p, nil
}

// String returns the pattern as it was given to ParsePattern.
func (p Pattern) String() string { return p.raw }

// Filter returns the MQTT subscription filter for the pattern: the pattern
// with each one-level placeholder replaced by "+", and cut at a multi-level
// one, which becomes "#". For the zero Pattern it is "".
func (p Pattern) Filter() string { return p.filter }

// HasDevice reports whether the pattern captures the device id.
func (p Pattern) HasDevice() bool { return p.hasDevice }

// HasMetric reports whether the pattern captures the metric name.
func (p Pattern) HasMetric() bool { return p.hasMetric }

// Match reports whether the concrete topic name matches the pattern and, if
// it does, returns the device id and metric name it captured. A value is
// "" exactly when the pattern lacks that placeholder; otherwise it is
// non-empty. Match allocates only to join the parts of a name from several
// levels.
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
	// span is how many topic levels the multi-level placeholder takes.
	span := 1
	if p.multi >= 0 {
		span = strings.Count(topic, "/") + 1 - (len(p.levels) - 1)
		if span < 1 {
			return "", "", false
		}
	}
	rest, more := topic, true
	for i, l := range p.levels {
		if l.kind == levelMulti {
			return device, metric, true
		}
		if !more {
			return "", "", false
		}
		n := 1
		if i == p.multi {
			n = span
		}
		var lvl string
		lvl, rest, more = cutLevels(rest, n)
		switch l.kind {
		case levelLiteral:
			if lvl != l.lit {
				return "", "", false
			}
		case levelDevice, levelMetric, levelDevices, levelMetrics:
			if lvl == "" || strings.HasPrefix(lvl, "/") || strings.HasSuffix(lvl, "/") || strings.Contains(lvl, "//") {
				return "", "", false
			}
			switch l.kind {
			case levelDevice:
				device = joinPart(device, lvl)
			case levelMetric:
				metric = joinPart(metric, lvl)
			case levelDevices:
				device = lvl
			case levelMetrics:
				metric = strings.ReplaceAll(lvl, "/", ".")
			}
		}
	}
	if more {
		return "", "", false
	}
	return device, metric, true
}

// cutLevels returns the first n levels of s, what follows them, and whether
// anything does.
func cutLevels(s string, n int) (levels, rest string, more bool) {
	i := 0
	for ; n > 0; n-- {
		j := strings.IndexByte(s[i:], '/')
		if j < 0 {
			return s, "", false
		}
		if n == 1 {
			return s[:i+j], s[i+j+1:], true
		}
		i += j + 1
	}
	return s, "", false
}

// joinPart joins a part of a name to the parts before it with '.'.
func joinPart(name, part string) string {
	if name == "" {
		return part
	}
	return name + "." + part
}
