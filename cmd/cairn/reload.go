package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/uplink"
)

// reloadSource is where a SIGHUP has the daemon read its configuration
// again.
type reloadSource struct {
	path string
	hups <-chan os.Signal
}

func reloadFrom(path string, hups <-chan os.Signal) reloadSource {
	return reloadSource{path: path, hups: hups}
}

// hangups delivers SIGHUP until ctx ends. Until it is called, a SIGHUP
// kills the process.
func hangups(ctx context.Context) <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		<-ctx.Done()
		signal.Stop(ch)
	}()
	return ch
}

// reloader applies a changed configuration file to the running gateway:
// mqtt.topics, with the embedded broker's ACL (its default rules and
// mqtt.embedded.acl_file, read again), retention and the uplink's
// settings take effect at once; a change anywhere else is
// logged as waiting for a restart. A file that does not load changes
// nothing. It is used by one goroutine.
type reloader struct {
	src      reloadSource
	cfg      *Config // the configuration in effect
	ingester *gateway.Ingester
	sub      *gateway.Subscriber // nil with the embedded broker
	broker   *gateway.Broker     // nil with an external broker
	writer   *buffer.Writer
	store    *buffer.Store    // for retention.max_disk_bytes auto
	uplinks  []*uplink.Uplink // one for each of cfg.uplinks
	log      *slog.Logger
}

// run reloads on every SIGHUP until ctx ends, and returns nil.
func (r *reloader) run(ctx context.Context) error {
	for {
		select {
		case <-r.src.hups:
			r.reload(ctx)
		case <-ctx.Done():
			return nil
		}
	}
}

// reload reads the file and applies what changed, logging what it did.
func (r *reloader) reload(ctx context.Context) {
	cfg, err := LoadConfig(r.src.path)
	if err != nil {
		r.log.Error("reload: configuration not applied, still running with the previous one", "err", err)
		return
	}
	applied := r.apply(ctx, cfg)
	restart := needsRestart(r.cfg, cfg)
	if len(restart) > 0 {
		r.log.Warn("reload: changes that take effect at the next restart", "keys", restart)
	}
	r.log.Info("configuration reloaded", "file", r.src.path, "applied", applied)
}

// apply applies the keys of cfg that can change while running and returns
// the ones it applied. A key whose change failed keeps its old value in
// r.cfg, so that the next reload tries again.
func (r *reloader) apply(ctx context.Context, cfg *Config) []string {
	applied := []string{}
	old := r.cfg
	next := *old
	// Before the Ingester's routes (below).
	applied = append(applied, r.applyBrokerPolicy(cfg, &next)...)
	if !reflect.DeepEqual(old.MQTT.Topics, cfg.MQTT.Topics) {
		// Routes change first: a message on a new filter that arrived
		// before its route would be acknowledged without being stored.
		r.ingester.SetRoutes(cfg.routes)
		if r.sub != nil {
			if err := r.sub.SetFilters(routeFilters(cfg.routes)); err != nil {
				r.log.Warn("reload: the broker did not confirm the new subscriptions; reconnecting to subscribe again", "err", err)
			}
		}
		next.MQTT.Topics, next.routes = cfg.MQTT.Topics, cfg.routes
		applied = append(applied, "mqtt.topics")
		r.log.Info("reload: mqtt.topics applied", "topics", topicList(cfg.MQTT.Topics))
	}
	if old.Retention != cfg.Retention {
		rt := cfg.Retention
		maxDisk := int64(rt.MaxDiskBytes)
		var err error
		if rt.MaxDiskBytes == AutoBytes {
			maxDisk, err = r.store.DefaultMaxDiskBytes()
		}
		if err == nil {
			err = r.writer.SetRetentionPolicy(ctx, retentionPolicy(rt, maxDisk))
		}
		if err != nil {
			r.log.Error("reload: retention not applied", "err", err)
		} else {
			next.Retention = rt
			applied = append(applied, "retention")
			r.log.Info("reload: retention applied", "raw_max_age", rt.RawMaxAge, "minute_stats_max_age", rt.MinuteStatsMaxAge,
				"hour_stats_max_age", rt.HourStatsMaxAge, "day_stats_max_age", rt.DayStatsMaxAge,
				"raw_max_readings_per_series", rt.RawMaxReadingsPerSeries, "raw_window_from_latest", rt.RawWindowFromLatest,
				"max_disk_bytes", rt.MaxDiskBytes)
		}
	}
	if r.applyUplinks(cfg, &next) {
		applied = append(applied, "uplink")
	}
	r.cfg = &next
	return applied
}

// applyBrokerPolicy gives the embedded broker the routes of cfg and, when
// it changed, its ACL file's rules, recorded in next, at once: a publish
// is judged for the route that decodes it. It does nothing when neither
// changed or there is no embedded broker, and returns the keys it applied
// besides mqtt.topics.
func (r *reloader) applyBrokerPolicy(cfg, next *Config) []string {
	old := r.cfg
	if r.broker == nil || (reflect.DeepEqual(old.MQTT.Topics, cfg.MQTT.Topics) && !aclChanged(old, cfg)) {
		return nil
	}
	var applied []string
	acl := old.secrets.acl
	if aclChanged(old, cfg) {
		acl = cfg.secrets.acl
		next.MQTT.Embedded = withACLFile(next.MQTT.Embedded, cfg.MQTT.Embedded.ACLFile)
		next.secrets.acl = acl
		applied = append(applied, "mqtt.embedded.acl_file")
		r.log.Info("reload: mqtt.embedded.acl_file applied", "file", cfg.MQTT.Embedded.ACLFile)
	}
	r.broker.SetRoutes(cfg.routes, acl)
	return applied
}

// needsRestart returns the top-level keys that differ between a and b
// and that reload does not apply. A section added to Config is listed here
// until apply handles it and clears it below.
func needsRestart(a, b *Config) []string {
	ac, bc := *a, *b
	// The upstreams' settings apply while they run; adding or removing
	// one takes a restart.
	sameUpstreams := slices.Equal(upstreamNames(a), upstreamNames(b))
	for _, c := range []*Config{&ac, &bc} {
		c.MQTT.Topics, c.routes = nil, nil
		if a.MQTT.Embedded != nil && b.MQTT.Embedded != nil {
			c.MQTT.Embedded = withACLFile(c.MQTT.Embedded, "")
		}
		c.Retention = RetentionConfig{}
		c.Store.forgetRemoved() // they do nothing, and their lines may move
		if sameUpstreams {
			c.Uplink, c.uplinks, c.uplinkFiles = nil, nil, nil
		}
	}
	keys := []string{}
	av, bv := reflect.ValueOf(ac), reflect.ValueOf(bc)
	for i := range av.NumField() {
		f := av.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			keys = append(keys, key)
		}
	}
	return keys
}

// aclChanged reports whether the embedded broker's ACL file, its name or
// its rules, differs from a to b; false unless both have the embedded
// broker.
func aclChanged(a, b *Config) bool {
	if a.MQTT.Embedded == nil || b.MQTT.Embedded == nil {
		return false
	}
	return a.MQTT.Embedded.ACLFile != b.MQTT.Embedded.ACLFile || !reflect.DeepEqual(a.secrets.acl, b.secrets.acl)
}

// withACLFile returns a copy of e with acl_file set to file.
func withACLFile(e *EmbeddedConfig, file string) *EmbeddedConfig {
	c := *e
	c.ACLFile = file
	return &c
}

// routeFilters returns the MQTT subscription filter of each route.
func routeFilters(routes []gateway.Route) []string {
	filters := make([]string, len(routes))
	for i, r := range routes {
		filters[i] = r.Pattern.Filter()
	}
	return filters
}

// topicList names the entries of topics for the log, one after the
// other: "preset tasmota", "preset zigbee2mqtt (base_topic z2m)",
// "sensors/{device}/telemetry (auto)".
func topicList(topics []TopicConfig) string {
	out := make([]string, len(topics))
	for i, t := range topics {
		switch {
		case t.Preset != "" && t.BaseTopic != "":
			out[i] = "preset " + t.Preset + " (base_topic " + t.BaseTopic + ")"
		case t.Preset != "":
			out[i] = "preset " + t.Preset
		default:
			format := t.Format
			if format == "" {
				format = "auto"
			}
			out[i] = t.Pattern + " (" + format + ")"
		}
	}
	return strings.Join(out, ", ")
}

// applyUplinks reconfigures each running upstream whose settings, or the
// content of whose token, password or certificate files, differ in cfg
// (a batch being tried is then sent again at once with them), and
// records in next the ones it applied. An upstream is known by its
// name; one added or removed takes a restart, which it logs. It
// reports whether it applied any.
func (r *reloader) applyUplinks(cfg, next *Config) bool {
	old := r.cfg
	if added, removed := upstreamsDiff(old, cfg); len(added)+len(removed) > 0 {
		r.log.Warn("reload: upstreams added or removed take effect at the next restart", "added", added, "removed", removed)
	}
	applied := false
	for i, name := range upstreamNames(old) {
		j := slices.Index(upstreamNames(cfg), name)
		if j < 0 || (old.Uplink[i] == cfg.Uplink[j] && old.uplinkFiles[i] == cfg.uplinkFiles[j]) {
			continue
		}
		if err := r.uplinks[i].Reconfigure(*cfg.uplinks[j]); err != nil {
			r.log.Error("reload: uplink not applied", "upstream", name, "err", err)
			continue
		}
		// next's lists are old's until here: copy them before the first change.
		if !applied {
			next.Uplink, next.uplinks, next.uplinkFiles = slices.Clone(old.Uplink), slices.Clone(old.uplinks), slices.Clone(old.uplinkFiles)
		}
		next.Uplink[i], next.uplinks[i], next.uplinkFiles[i] = cfg.Uplink[j], cfg.uplinks[j], cfg.uplinkFiles[j]
		applied = true
		r.log.Info("reload: uplink applied", "upstream", name, "url", cfg.Uplink[j].URL, "kind", cfg.Uplink[j].kind())
	}
	return applied
}

// upstreamNames returns the names of c's upstreams, in order.
func upstreamNames(c *Config) []string {
	names := make([]string, len(c.Uplink))
	for i, u := range c.Uplink {
		names[i] = u.Name
	}
	return names
}

// upstreamsDiff returns the names of the upstreams that b has and a has
// not, and those that a has and b has not.
func upstreamsDiff(a, b *Config) (added, removed []string) {
	an, bn := upstreamNames(a), upstreamNames(b)
	for _, n := range bn {
		if !slices.Contains(an, n) {
			added = append(added, n)
		}
	}
	for _, n := range an {
		if !slices.Contains(bn, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}
