package main

import (
	"cmp"
	"fmt"
	"regexp"
)

// Upstreams is the uplink: section: a list of upstreams, each with its
// own cursor in the store's log,
//
//	uplink:
//	  - name: vm
//	    kind: influx
//	    url: http://127.0.0.1:8428/write
//	  - name: central
//	    kind: prometheus
//	    url: https://central.example/api/v1/write
//
// or one upstream's keys, the form before lists, named default unless it
// has a name:
//
//	uplink:
//	  url: http://127.0.0.1:8428/write
//
// A block without url, as the example configuration has, is no upstream:
// the gateway works offline, and nothing is kept for sending.
type Upstreams []UplinkConfig

// UnmarshalYAML decodes a list of upstreams or one upstream's keys,
// each over defaultUplink. It takes the decoder's own unmarshal, which
// keeps it strict: an unknown key is an error.
func (us *Upstreams) UnmarshalYAML(unmarshal func(any) error) error {
	var shape any
	if err := unmarshal(&shape); err != nil {
		return err
	}
	switch shape.(type) {
	case map[string]any, map[any]any:
		var u UplinkConfig
		if err := unmarshal(&u); err != nil {
			return err
		}
		*us = nil
		if u.URL != "" {
			u.key = "uplink"
			*us = Upstreams{u}
		}
	case []any:
		var list []UplinkConfig
		if err := unmarshal(&list); err != nil {
			return err
		}
		for i := range list {
			list[i].key = fmt.Sprintf("uplink[%d]", i)
		}
		*us = list
	default: // a scalar: the decoder says a list is wanted, and where
		var list []UplinkConfig
		return unmarshal(&list)
	}
	return nil
}

// UnmarshalYAML decodes one upstream over defaultUplink, strictly.
func (u *UplinkConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain UplinkConfig // without this method
	p := plain(defaultUplink())
	if err := unmarshal(&p); err != nil {
		return err
	}
	*u = UplinkConfig(p)
	return nil
}

// kind returns what the upstream speaks: kind, or format, its earlier
// name, or influx.
func (u *UplinkConfig) kind() string {
	return cmp.Or(u.Kind, u.Format, "influx")
}

// keyPath returns where the file has the upstream: "uplink", or
// "uplink[1]" in a list.
func (u *UplinkConfig) keyPath() string {
	return cmp.Or(u.key, "uplink")
}

// defaultUpstream names an upstream that has no name: its cursor in the
// store's log.
const defaultUpstream = "default"

// upstreamNameRE is what an upstream's name is: it names a cursor in the
// store, a label value of /metrics and a folder of parked batches.
var upstreamNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// validateUplinks checks every upstream and derives c.uplinks from them;
// a name left out is default, and no two upstreams share a name.
func (c *Config) validateUplinks(bad func(key, format string, a ...any)) {
	c.uplinks = nil
	seen := make(map[string]string) // name → key path
	for i := range c.Uplink {
		u := &c.Uplink[i]
		unnamed := u.Name == ""
		if unnamed {
			u.Name = defaultUpstream
		}
		switch other, taken := seen[u.Name]; {
		case !upstreamNameRE.MatchString(u.Name):
			bad(u.keyPath()+".name", "use 1 to 32 of a-z 0-9 _ -, starting with a letter or digit (got %q)", u.Name)
		case taken && unnamed:
			bad(u.keyPath()+".name", "must be set: %s is named default already, the name of an upstream without one", other)
		case taken:
			bad(u.keyPath()+".name", "%q is the name of %s already: each upstream needs its own", u.Name, other)
		}
		seen[u.Name] = u.keyPath()
		c.uplinks = append(c.uplinks, validateUplink(u, bad))
	}
}
