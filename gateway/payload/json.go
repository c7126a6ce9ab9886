package payload

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// jsonParser is a single-pass parser of one JSON object or array of
// objects. Syntax errors and
// nesting beyond MaxDepth stop it at once; other problems are kept in err,
// the first one winning, while it goes on checking the syntax, so that
// malformed JSON is always reported as such.
type jsonParser struct {
	d   *Decoder
	s   []byte
	i   int // next byte
	out []buffer.Reading

	ignored     int
	missing     int    // missing values, also counted in ignored
	topicDevice bool   // the topic supplied the device
	device      string // from the "device" field of the current object
	ts          int64  // from its best time field so far
	tsRank      int    // 0: none, else the rank in timeFields + 1
	emptyKeys   int    // empty keys in d.path
	err         *RejectError
}

// timeFields are the names of the top-level fields that give the reading
// time, matched in any case, least precedence first.
var timeFields = [...]string{"timestamp", "time", "ts", "epoch"}

// object decodes the object at p.s[p.i] as a whole payload would be (see
// decodeJSON): its readings get their device and time.
func (p *jsonParser) object(device, metric string, recv time.Time) *RejectError {
	first := len(p.out)
	p.topicDevice, p.device, p.tsRank = device != "", "", 0
	p.d.path = p.d.path[:0]
	if err := p.container(1, true); err != nil {
		return err
	}
	if p.err != nil {
		return nil
	}
	out := p.out[first:]
	if len(out) == 0 {
		return nil
	}
	if metric != "" {
		if i := onlyValue(out); i >= 0 {
			if prob := encoding.CheckName(metric, encoding.MaxMetricLen); prob != "" {
				p.fail(rejectf(ReasonBadMetric, "metric %s from topic: %s", quote(metric), prob))
				return nil
			}
			out[i].Metric = metric
		}
	}
	if device == "" {
		if device = p.device; device == "" {
			p.fail(rejectf(ReasonBadDevice, `no device: topic has no %s and payload no "device" field`, placeholderDevice))
			return nil
		}
	}
	ts := recv.UnixNano()
	for k := range out {
		if p.tsRank > 0 {
			ts = p.d.restamp(p.ts, recv)
		}
		out[k].Device, out[k].TS = device, ts
	}
	return nil
}

// onlyValue returns the index in out, an object's readings, of the one
// that the topic's {metric} names: that of a top-level "value" field when
// it is the object's only number reading, or its only reading if it has no
// number; else -1.
func onlyValue(out []buffer.Reading) int {
	numbers, at := 0, -1
	for i := range out {
		if !out[i].IsText() {
			numbers++
			at = i
		}
	}
	switch {
	case numbers == 1 && out[at].Metric == "value":
		return at
	case numbers == 0 && len(out) == 1 && out[0].Metric == "value":
		return 0
	}
	return -1
}

// array decodes the array at p.s[p.i], whose elements must be objects.
func (p *jsonParser) array(device, metric string, recv time.Time) *RejectError {
	if p.enter(']') {
		return nil
	}
	for n := 0; ; n++ {
		var err *RejectError
		if p.peek() == '{' {
			err = p.object(device, metric, recv)
		} else {
			if c := p.peek(); c != 0 {
				p.fail(rejectf(ReasonInvalidJSON, "array element %d is %s, want an object", n, jsonKind(c)))
			}
			err = p.value(1)
		}
		if err != nil {
			return err
		}
		if more, err := p.next(']'); !more {
			return err
		}
	}
}

func (p *jsonParser) skipSpace() { p.i = skipSpace(p.s, p.i) }

// enter steps into the array or object at p.i, whose end is end ']' or
// '}'; it reports whether the container is empty, with p.i past its end.
func (p *jsonParser) enter(end byte) (empty bool) {
	p.i++
	p.skipSpace()
	if p.peek() == end {
		p.i++
		return true
	}
	return false
}

// next reads what follows an element of an array (end ']') or a member of
// an object (end '}'): after a comma it reports more, with p.i at the next
// one; after end it reports no more and a nil error; anything else is a
// syntax error.
func (p *jsonParser) next(end byte) (more bool, err *RejectError) {
	p.skipSpace()
	switch p.peek() {
	case ',':
		p.i++
		p.skipSpace()
		return true, nil
	case end:
		p.i++
		return false, nil
	}
	if end == ']' {
		return false, p.unexpected("after array element")
	}
	return false, p.unexpected("after object key:value pair")
}

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
	end := byte(']')
	if object {
		end = '}'
	}
	if p.enter(end) {
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
		if more, err := p.next(end); !more {
			return err
		}
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

// key reads an object member's key and the ':' after it, at p.i, and
// returns the bounds of the key's contents and whether they hold escapes;
// p.i is then at the value.
func (p *jsonParser) key() (start, end int, esc bool, err *RejectError) {
	if p.peek() != '"' {
		return 0, 0, false, p.unexpected("looking for beginning of object key string")
	}
	if start, end, esc, err = p.str(); err != nil {
		return 0, 0, false, err
	}
	p.skipSpace()
	if p.peek() != ':' {
		return 0, 0, false, p.unexpected("after object key")
	}
	p.i++
	p.skipSpace()
	return start, end, esc, nil
}

// member parses the "key": value pair at p.i in an object at level depth,
// turning it into readings with emit.
func (p *jsonParser) member(depth int, emit bool) *RejectError {
	ks, ke, esc, err := p.key()
	if err != nil {
		return err
	}
	if !emit {
		return p.value(depth)
	}
	key := p.s[ks:ke]
	if esc {
		p.d.key = unescape(p.d.key[:0], key)
		key = p.d.key
	}
	if depth == 1 {
		if string(key) == "device" {
			return p.deviceField()
		}
		for rank, name := range timeFields {
			if asciiEqualFold(key, name) {
				return p.timestamp(key, rank+1)
			}
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
	case c == '"':
		err = p.stringValue(depth, key)
	case c == 'n':
		p.ignored++
		p.missing++
		err = p.value(depth)
	case c == '[':
		p.ignored++
		err = p.value(depth)
	case c == 't' || c == 'f':
		if err = p.value(depth); err == nil && c == 't' {
			p.emit(depth, key, 1, nil, "true")
		} else if err == nil {
			p.emit(depth, key, 0, nil, "false")
		}
	case c == '-' || isDigit(c):
		var n numScan
		var start int
		if n, start, err = p.number(); err == nil {
			p.emit(depth, key, n.float(p.s, start), p.s[start:n.end], "")
		}
	default:
		err = p.unexpected("looking for beginning of value")
	}
	return err
}

// emit appends the reading key = v (raw is v's text, for messages), read
// from the state word word if it is not "" (see parseText).
func (p *jsonParser) emit(depth int, key []byte, v float64, raw []byte, word string) {
	metric, ok := p.metric(depth, key)
	if !ok {
		return
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		p.err = rejectf(ReasonNonFinite, "metric %s: %s is not a finite float64", quote(metric), quote(raw))
		return
	}
	p.out = append(p.out, buffer.Reading{Metric: metric, Value: v, Word: word})
}

// emitText appends the text reading key = text, or drops the field if
// text cannot be a reading's text.
func (p *jsonParser) emitText(depth int, key, text []byte) {
	metric, ok := p.metric(depth, key)
	if !ok {
		return
	}
	if r, ok := p.d.textReading("", metric, 0, text); ok {
		p.out = append(p.out, r)
	}
}

// metric returns the metric name of the field key at level depth, or
// false after noting why it is not a valid name.
func (p *jsonParser) metric(depth int, key []byte) (string, bool) {
	if p.err != nil {
		return "", false
	}
	name := key
	if depth > 1 {
		p.d.name = append(append(append(p.d.name[:0], p.d.path...), '.'), key...)
		name = p.d.name
	}
	if len(key) == 0 || p.emptyKeys > 0 {
		p.err = rejectf(ReasonBadMetric, "metric %s: empty key", quote(name))
		return "", false
	}
	metric, known := p.d.names[string(name)] // names in the cache are valid
	if !known {
		if prob := encoding.CheckName(name, encoding.MaxMetricLen); prob != "" {
			p.err = rejectf(ReasonBadMetric, "metric %s: %s", quote(name), prob)
			return "", false
		}
		metric = p.d.intern(name)
	}
	return metric, true
}

// stringValue reads the string at p.i, the value of key, as a value (see
// parseText), or else as a text; a field named unit stays text that is no
// value, ignored and counted.
func (p *jsonParser) stringValue(depth int, key []byte) *RejectError {
	s, e, esc, err := p.str()
	if err != nil {
		return err
	}
	raw := p.s[s:e]
	if esc {
		p.d.str = unescape(p.d.str[:0], raw)
		raw = p.d.str
	}
	switch v, kind, word := parseText(raw); kind {
	case textNumber:
		p.emit(depth, key, v, raw, word)
	case textNonFinite:
		p.emit(depth, key, math.Inf(1), raw, "")
	case textMissing:
		p.missing++
		p.ignored++
	default:
		if string(key) == "unit" {
			p.ignored++
			break
		}
		p.emitText(depth, key, raw)
	}
	return nil
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
		ns, prob = parseISOTime(raw, p.d.zone)
		if n, ok := scanNumber(raw, 0, false); prob != "" && ok && n.end == len(raw) && len(raw) > 0 && isDigit(raw[0]) {
			ns, prob = epochNanos(n)
		}
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
	if prob := encoding.CheckDevice(b); prob != "" {
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
