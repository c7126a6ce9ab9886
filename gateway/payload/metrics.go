package payload

import (
	"fmt"
	"path"
	"strings"

	"github.com/cairn-gateway/cairn/buffer"
)

// Metrics selects readings by metric name, with path.Match patterns ("*"
// is any run of characters but '/'): a reading must match an Include
// pattern, if there are any, and no Exclude pattern. The name is the
// reading's metric as its route reads it (a mapping's after StripPrefix).
// A route's Metrics drop the readings it does not select, counted as
// ignored fields, whatever reads the route: a format, a mapping or a
// preset, whose routes come with its default excludes (PresetExclude).
type Metrics struct {
	Include, Exclude []string
}

// Check reports the first pattern that is not a path.Match pattern.
func (m *Metrics) Check() error {
	for _, ps := range [][]string{m.Include, m.Exclude} {
		for _, p := range ps {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("metric pattern %q: %v", p, err)
			}
		}
	}
	return nil
}

// selects reports whether metric name passes m; a nil m selects every
// name.
func (m *Metrics) selects(name string) bool {
	if m == nil {
		return true
	}
	if len(m.Include) > 0 {
		in := false
		for _, p := range m.Include {
			if matchName(p, name) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	for _, p := range m.Exclude {
		if matchName(p, name) {
			return false
		}
	}
	return true
}

// matchName reports whether name matches the path.Match pattern p. A
// pattern without wildcards, or with one '*' at its end (a preset's
// excludes are such), is compared without path.Match, and one whose
// first byte is not the name's fails at once: a route's patterns are
// tried on every reading.
func matchName(p, name string) bool {
	if len(p) == 0 {
		return len(name) == 0
	}
	if !isWildcard(p[0]) && (len(name) == 0 || p[0] != name[0]) {
		return false
	}
	i := 0
	for i < len(p) && !isWildcard(p[i]) {
		i++
	}
	switch {
	case i == len(p):
		return p == name
	case i == len(p)-1 && p[i] == '*':
		return strings.HasPrefix(name, p[:i]) && !strings.Contains(name[i:], "/")
	}
	ok, _ := path.Match(p, name)
	return ok
}

// isWildcard reports whether c is special in a path.Match pattern.
func isWildcard(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

// drop removes from rs the readings m does not select, keeping the order
// of the others, and returns what is left and how many it removed.
func (m *Metrics) drop(rs []buffer.Reading) ([]buffer.Reading, int) {
	if m == nil {
		return rs, 0
	}
	kept := rs[:0]
	for _, r := range rs {
		if m.selects(r.Metric) {
			kept = append(kept, r)
		}
	}
	return kept, len(rs) - len(kept)
}
