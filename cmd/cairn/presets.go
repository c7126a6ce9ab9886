package main

import (
	"strings"

	"github.com/cairn-gateway/cairn/gateway"
)

// presetMapping reports whether t sets a mapping option that a preset
// does not take: all of them but metrics.
func (t *TopicConfig) presetMapping() bool {
	m := *t
	m.Metrics = MetricsFilter{}
	return m.hasMapping()
}

// presetOptions applies the options of a preset's topic entry t to its
// routes: metrics, which replace the preset's default excludes when
// either list is set (an empty exclude keeps every field), and
// device_tag. It reports each problem to bad under key.
func presetOptions(t *TopicConfig, key string, routes []gateway.Route, bad func(key, format string, a ...any)) {
	if t.Metrics.Include != nil || t.Metrics.Exclude != nil {
		m := &gateway.Metrics{Include: t.Metrics.Include, Exclude: t.Metrics.Exclude}
		if err := m.Check(); err != nil {
			bad(key+".metrics", "%v", err)
		}
		for i := range routes {
			routes[i].Metrics = m
		}
	}
	if t.DeviceTag == "" {
		return
	}
	if t.Preset != "telegraf" {
		bad(key+".device_tag", "only preset telegraf takes a device tag (got preset %s)", t.Preset)
		return
	}
	if strings.TrimSpace(t.DeviceTag) != t.DeviceTag || strings.ContainsAny(t.DeviceTag, "\r\n") {
		bad(key+".device_tag", "want a tag key as Telegraf writes it, such as source (got %q)", t.DeviceTag)
		return
	}
	for i := range routes {
		routes[i].DeviceTag = t.DeviceTag
	}
}
