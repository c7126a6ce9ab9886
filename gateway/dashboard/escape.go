package dashboard

// The page's escaping. Each helper writes what html/template wrote for
// a string in that place of the page (its htmlEscaper, attrEscaper,
// urlEscaper and urlFilter plus urlNormalizer) when the page was a
// template: the page is the same, byte for byte (testdata/page).

// htmlEscapes are the replacements of html/template's htmlReplacementTable:
// the bytes that are markup in text and in a quoted attribute value, and
// '+' (for UTF-7 browsers); NUL becomes U+FFFD, as an HTML parser would.
// Other bytes, invalid UTF-8 among them, are written as they are.
var htmlEscapes = [...]string{
	0:    "\uFFFD",
	'"':  "&#34;",
	'&':  "&amp;",
	'\'': "&#39;",
	'+':  "&#43;",
	'<':  "&lt;",
	'>':  "&gt;",
}

// text writes s escaped as HTML text or a quoted attribute value.
func (b *pageBuf) text(s string) {
	done := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; int(c) < len(htmlEscapes) && htmlEscapes[c] != "" {
			b.b = append(b.b, s[done:i]...)
			b.b = append(b.b, htmlEscapes[c]...)
			done = i + 1
		}
	}
	b.b = append(b.b, s[done:]...)
}

// query writes s percent-encoded as a value in a URL's query: every
// byte but ASCII letters, digits and "-._~" as %xx, in lower case.
// What it writes needs no further escaping in an attribute.
func (b *pageBuf) query(s string) { b.urlBytes(s, false) }

// url writes s as a whole URL in an attribute value (href, action): a
// URL whose scheme is other than http, https or mailto becomes
// "#ZgotmplZ"; bytes that may not stand in a URL are percent-encoded,
// while the URL's own delimiters and valid %xx escapes are kept; the
// result is escaped for the attribute ("&" is "&amp;").
func (b *pageBuf) url(s string) {
	if !isSafeURL(s) {
		s = "#ZgotmplZ"
	}
	var n pageBuf
	n.urlBytes(s, true)
	b.text(string(n.b))
}

// isSafeURL reports whether s has no scheme or one of http, https and
// mailto (any case).
func isSafeURL(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '/':
			return true
		case ':':
			p := s[:i]
			return equalFold(p, "http") || equalFold(p, "https") || equalFold(p, "mailto")
		}
	}
	return true
}

// equalFold reports whether s is word, ASCII letters compared without
// case; word is lower case.
func equalFold(s, word string) bool {
	if len(s) != len(word) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

// urlBytes writes s percent-encoding every byte that is not unreserved
// in a URL; with keep, it keeps the reserved delimiters and the valid
// %xx escapes.
func (b *pageBuf) urlBytes(s string, keep bool) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~':
		case keep && isURLDelim(c):
		case keep && c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
		default:
			b.b = append(b.b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b.b = append(b.b, c)
	}
}

// isURLDelim reports whether c is one of RFC 3986's reserved
// delimiters that html/template keeps in a URL, which are all of them
// but the single quote and the parentheses.
func isURLDelim(c byte) bool {
	switch c {
	case '!', '#', '$', '&', '*', '+', ',', '/', ':', ';', '=', '?', '@', '[', ']':
		return true
	}
	return false
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
