package payload

import (
	"math"

	"github.com/cairn-gateway/cairn/buffer"
)

// A document is a JSON object flattened into its leaves: each number,
// string, boolean, null and array, named by the keys that lead to it
// joined with '.'. Presets and mappings (preset.go, mapping.go) read
// envelopes such as a LoRaWAN uplink or a JSON-RPC notification from it:
// they pick the device id, the time and the readings out of the leaves by
// name, which a single pass that turns fields into readings as it meets
// them cannot do. A Decoder keeps one document's buffers between calls,
// so flattening a familiar payload does not allocate.

// leafKind says what a leaf of a document holds.
type leafKind uint8

const (
	leafNumber leafKind = iota
	leafString
	leafBool
	leafNull
	leafArray // skipped whole; its text is the raw JSON
)

// leaf is one leaf of a document. Its name and text are offsets into the
// document's buffers, which grow as it is built.
type leaf struct {
	kind      leafKind
	name, top span    // the dotted name; top is its first key
	text      span    // a string's unescaped text, a number's or array's source
	num       float64 // a number's value, a boolean's 1 or 0
	used      bool    // taken by the reader: not a reading, not counted
	depth     int     // 1 for a top-level field
}

type span struct{ start, end int }

// document is a flattened JSON object (see leaf).
type document struct {
	leaves []leaf
	names  []byte
	text   []byte
}

func (doc *document) name(l *leaf) []byte { return doc.names[l.name.start:l.name.end] }
func (doc *document) str(l *leaf) []byte  { return doc.text[l.text.start:l.text.end] }

// find returns the leaf named name, or nil.
func (doc *document) find(name string) *leaf {
	for i := range doc.leaves {
		if string(doc.name(&doc.leaves[i])) == name {
			return &doc.leaves[i]
		}
	}
	return nil
}

// sibling returns the leaf beside leaves[i] in its object whose last key
// is key, or nil; the object's name is the first parentLen bytes of the
// leaf's name and a '.' (0 for the document itself). flatten writes the
// leaves of an object next to each other, so only they are looked at.
func (doc *document) sibling(i, parentLen int, key string) *leaf {
	n := doc.name(&doc.leaves[i])
	inObject := func(j int) bool {
		m := doc.name(&doc.leaves[j])
		return parentLen == 0 || len(m) > parentLen && string(m[:parentLen]) == string(n[:parentLen])
	}
	match := func(j int) bool {
		m := doc.name(&doc.leaves[j])
		return len(m) == parentLen+len(key) && string(m[parentLen:]) == key && inObject(j)
	}
	for j := i - 1; j >= 0 && inObject(j); j-- {
		if match(j) {
			return &doc.leaves[j]
		}
	}
	for j := i + 1; j < len(doc.leaves) && inObject(j); j++ {
		if match(j) {
			return &doc.leaves[j]
		}
	}
	return nil
}

// under reports whether leaf l lies under the object named prefix.
func (doc *document) under(l *leaf, prefix string) bool {
	n := doc.name(l)
	return len(n) > len(prefix) && n[len(prefix)] == '.' && string(n[:len(prefix)]) == prefix
}

// readDocument flattens the JSON document payload for a docReader that
// appends to dst. An empty payload or one that is not an object is a
// *RejectError.
func (d *Decoder) readDocument(dst []buffer.Reading, payload []byte) (docReader, error) {
	start := skipSpace(payload, 0)
	if start == len(payload) {
		return docReader{}, &RejectError{Reason: ReasonEmptyPayload}
	}
	if err := d.flatten(payload, start); err != nil {
		return docReader{}, err
	}
	return docReader{d: d, out: dst, first: len(dst)}, nil
}

// flatten parses the JSON object at payload[start] into d.doc. Syntax
// errors and nesting beyond MaxDepth are rejections, as in decodeJSON;
// other content is not judged here.
func (d *Decoder) flatten(payload []byte, start int) *RejectError {
	doc := &d.doc
	doc.leaves, doc.names, doc.text = doc.leaves[:0], doc.names[:0], doc.text[:0]
	if start >= len(payload) || payload[start] != '{' {
		c := byte(0)
		if start < len(payload) {
			c = payload[start]
		}
		return rejectf(ReasonInvalidJSON, "payload is %s, want a JSON object", jsonKind(c))
	}
	p := jsonParser{d: d, s: payload, i: start}
	if err := p.flatObject(1, span{}, span{}); err != nil {
		return err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		return p.unexpected("after top-level object")
	}
	return nil
}

// flatObject flattens the object at p.i, at nesting level depth, named
// parent (whose first key is top); both are empty at the top level.
func (p *jsonParser) flatObject(depth int, parent, top span) *RejectError {
	if depth > MaxDepth {
		return rejectf(ReasonTooDeep, "nested deeper than %d levels at byte %d", MaxDepth, p.i)
	}
	doc := &p.d.doc
	if p.enter('}') {
		return nil
	}
	for {
		ks, ke, esc, err := p.key()
		if err != nil {
			return err
		}
		// The member's name is the parent's, '.', and the key.
		base := len(doc.names)
		if depth > 1 {
			doc.names = append(doc.names, doc.names[parent.start:parent.end]...)
			doc.names = append(doc.names, '.')
		}
		if esc {
			doc.names = unescape(doc.names, p.s[ks:ke])
		} else {
			doc.names = append(doc.names, p.s[ks:ke]...)
		}
		name, first := span{base, len(doc.names)}, top
		if depth == 1 {
			first = name
		}
		if err := p.flatValue(depth, name, first); err != nil {
			return err
		}
		if more, err := p.next('}'); !more {
			return err
		}
	}
}

// flatValue flattens the value at p.i of the member named name.
func (p *jsonParser) flatValue(depth int, name, top span) *RejectError {
	doc := &p.d.doc
	l := leaf{name: name, top: top, depth: depth}
	switch c := p.peek(); {
	case c == '{':
		return p.flatObject(depth+1, name, top)
	case c == '[':
		start := p.i
		if err := p.container(depth+1, false); err != nil {
			return err
		}
		l.kind = leafArray
		l.text = p.d.docText(p.s[start:p.i], false)
	case c == '"':
		s, e, esc, err := p.str()
		if err != nil {
			return err
		}
		l.kind = leafString
		l.text = p.d.docText(p.s[s:e], esc)
	case c == 't' || c == 'f':
		if err := p.value(depth); err != nil {
			return err
		}
		l.kind = leafBool
		if c == 't' {
			l.num = 1
		}
	case c == 'n':
		if err := p.value(depth); err != nil {
			return err
		}
		l.kind = leafNull
	case c == '-' || isDigit(c):
		n, start, err := p.number()
		if err != nil {
			return err
		}
		l.kind = leafNumber
		l.num = n.float(p.s, start)
		l.text = p.d.docText(p.s[start:n.end], false)
	default:
		return p.unexpected("looking for beginning of value")
	}
	doc.leaves = append(doc.leaves, l)
	return nil
}

// docText appends b, unescaped if esc, to the document's text.
func (d *Decoder) docText(b []byte, esc bool) span {
	start := len(d.doc.text)
	if esc {
		d.doc.text = unescape(d.doc.text, b)
	} else {
		d.doc.text = append(d.doc.text, b...)
	}
	return span{start, len(d.doc.text)}
}

// value reads leaf l as a value the way every format does (see Decode):
// a number, a boolean, or text holding a number or a state word; word is
// the word of a boolean or a state word (see parseText).
func (doc *document) value(l *leaf) (v float64, kind textKind, word string) {
	switch l.kind {
	case leafNumber:
		if math.IsInf(l.num, 0) || math.IsNaN(l.num) {
			return 0, textNonFinite, ""
		}
		return l.num, textNumber, ""
	case leafBool:
		if l.num == 1 {
			return 1, textNumber, "true"
		}
		return 0, textNumber, "false"
	case leafString:
		return parseText(doc.str(l))
	case leafNull:
		return 0, textMissing, ""
	}
	return 0, textOther, ""
}
