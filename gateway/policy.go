package gateway

import (
	"slices"
	"strings"
)

// policy is one generation of what the embedded broker judges and decodes
// a message by: the ingest routes, in order, and the ACL file's rules.
// A publish is judged for the route that will decode it, the first whose
// pattern matches its topic (see guardHook.writeReason). A policy is
// immutable: Broker.SetRoutes replaces it whole, and a message is judged
// and decoded by the policy it was judged by, so that no message is
// judged by one generation of routes and rules and decoded by another.
type policy struct {
	routes []Route
	// own[i] reports whether routes[i] is a topic owner's own: its
	// device is one {device} level and nothing else (ownFilter).
	own      []bool
	defaults []ACLRule // the own routes' filters, read and write
	acl      *ACL      // the ACL file's rules; nil: none
}

// newPolicy returns the policy of routes and acl (which may be nil).
func newPolicy(routes []Route, acl *ACL) *policy {
	p := &policy{routes: slices.Clone(routes), own: make([]bool, len(routes)), acl: acl}
	for i := range p.routes {
		if f := ownFilter(&p.routes[i]); f != "" {
			p.own[i] = true
			p.defaults = append(p.defaults, ACLRule{Access: ReadWrite, Filter: f})
		}
	}
	return p
}

// matchRoute returns the index of the first of routes whose pattern
// matches topic, and what it captured; -1 if none does. Whatever a
// message's topic matches, it is this route that decodes it.
func matchRoute(routes []Route, topic string) (i int, device, metric string) {
	for i := range routes {
		if d, m, ok := routes[i].Pattern.Match(topic); ok {
			return i, d, m
		}
	}
	return -1, "", ""
}

// ownFilter returns the filter of the topics of r that are a user's own,
// with {username} for its device level, {metric} as "+" and a last
// {metric+} as "#"; or "" if r is no user's own. A route is a user's own
// when its device id is one {device} level and the payload cannot name
// another device. A pattern without {device} (the payload names the
// device), whose device id spans levels or is joined from several (a
// bridge's, publishing for many devices), and one whose payload may name
// the device (Route.payloadDevice) are no user's own: they are open only
// to those an ACL rule opens them to. A skipped route with one {device}
// level is its device's own: a sensor's availability (its last will,
// which the broker checks at CONNECT) and its command topics store
// nothing, and a device that may not set its will cannot connect.
//
// The devices a user's own route stores are the user's name and, for a
// Tasmota sensor with an Id, names under it (NAME/ID).
func ownFilter(r *Route) string {
	if !r.Pattern.HasDevice() || r.PayloadDevice {
		return ""
	}
	levels := strings.Split(r.Pattern.String(), "/")
	devices := 0
	for i, l := range levels {
		switch l {
		case PlaceholderDevice:
			levels[i] = PlaceholderUsername
			devices++
		case PlaceholderMetric:
			levels[i] = "+"
		case PlaceholderMetricLevels:
			if i != len(levels)-1 {
				return ""
			}
			levels[i] = "#"
		case PlaceholderDeviceLevels:
			return ""
		}
	}
	if devices != 1 {
		return ""
	}
	return strings.Join(levels, "/")
}
