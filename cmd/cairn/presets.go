package main

import (
	"strings"

	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/payload"
)

// metricsFilter returns the metrics filter of topic entry t, or nil when
// it sets neither list; on a preset's entry it replaces the preset's
// default excludes (an empty exclude keeps every field). It reports a bad
// pattern to bad under key.
func (t *TopicConfig) metricsFilter(key string, bad func(key, format string, a ...any)) *payload.Metrics {
	if t.Metrics.Include == nil && t.Metrics.Exclude == nil {
		return nil
	}
	m := &payload.Metrics{Include: t.Metrics.Include, Exclude: t.Metrics.Exclude}
	if err := m.Check(); err != nil {
		bad(key+".metrics", "%v", err)
	}
	return m
}

// textsOption returns the texts of topic entry t, the metric patterns
// whose state words are texts; on a preset's entry they add to the modes
// the preset knows. It reports a bad pattern to bad under key.
func (t *TopicConfig) textsOption(key string, bad func(key, format string, a ...any)) []string {
	if err := payload.CheckTexts(t.Texts); err != nil {
		bad(key+".texts", "%v", err)
	}
	return t.Texts
}

// presetOptions applies the option only a preset's topic entry t takes,
// device_tag, to its routes. It reports each problem to bad under key.
func presetOptions(t *TopicConfig, key string, routes []gateway.Route, bad func(key, format string, a ...any)) {
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
