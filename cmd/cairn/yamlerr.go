package main

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// nodeAt is a line of a YAML document and the kind of a node that starts
// there: the decoder's "line N: cannot unmarshal !!map" names the line of
// the map's first key, which keyPaths gives to that key, not to the map.
type nodeAt struct {
	line int
	kind yaml.Kind
}

// containerPaths maps each map or list of a YAML document, by the line it
// starts on, to its key path ("mqtt.topics", "mqtt.topics[0]").
func containerPaths(root *yaml.Node) map[nodeAt]string {
	paths := make(map[nodeAt]string)
	walkYAML(root, func(n, _ *yaml.Node, path string) {
		if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && path != "" {
			at := nodeAt{n.Line, n.Kind}
			if _, ok := paths[at]; !ok { // the outermost wins: the decoder stops there
				paths[at] = path
			}
		}
	})
	return paths
}

// unmarshalRE matches yaml.v3's type error: the tag of the value, the
// value if it is a scalar, and the Go type it did not fit.
var unmarshalRE = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")

// explainTypeError rewrites yaml.v3's "cannot unmarshal !!map into
// []main.TopicConfig" as what the key wants and what it got: "must be a
// list; each entry starts with '-' (got a block of keys)". It reports
// false for any other message. kind is the node kind of the tag, for
// containerPaths.
func explainTypeError(reason string) (msg string, kind yaml.Kind, ok bool) {
	m := unmarshalRE.FindStringSubmatch(reason)
	if m == nil {
		return "", 0, false
	}
	tag, value, goType := m[1], m[2], m[3]
	got := fmt.Sprintf("%q", value)
	switch tag {
	case "!!map":
		got, kind = "a block of keys", yaml.MappingNode
	case "!!seq":
		got, kind = "a list", yaml.SequenceNode
	case "!!null":
		got = "nothing"
	}
	return fmt.Sprintf("must be %s (got %s)", wantedType(goType), got), kind, true
}

// wantedType says in plain words what a value of the Go type goType (as
// the YAML decoder names it) is written as.
func wantedType(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list; each entry starts with '-'"
	case strings.HasPrefix(goType, "map["):
		return "a block of keys, one 'key: value' a line"
	case strings.HasPrefix(goType, "struct {"), strings.HasPrefix(goType, "main."):
		return "a block of keys, one 'key: value' a line"
	}
	switch goType {
	case "int", "int64", "int32", "uint", "uint64", "uint32":
		return "a whole number"
	case "float64", "float32":
		return "a number"
	case "bool":
		return "true or false"
	case "string":
		return "a text (put it in quotes if it looks like something else)"
	case "time.Duration":
		return "a duration such as 500ms, 2s or 5m"
	}
	return "a value of another type (" + goType + ")"
}
