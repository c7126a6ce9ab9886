package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/uplink"
)

func TestLoadConfig_Example(t *testing.T) {
	cfg, err := LoadConfig("../../configs/cairn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	// The README's quick start keeps the data in ./data of the clone,
	// beside configs/.
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	want.DataDir = filepath.Join(repo, "data")
	// Otherwise the example documents the defaults: it must mean the same
	// as an empty file.
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("configs/cairn.yaml differs from the defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestParseConfig_Empty(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MQTT.Embedded == nil || cfg.MQTT.Embedded.Listen != "127.0.0.1:1883" {
		t.Errorf("empty config: got mqtt %+v, want the embedded broker on loopback", cfg.MQTT)
	}
	if got := cfg.routes[0].Pattern.String(); got != "sensors/{device}/telemetry" {
		t.Errorf("default topic: got %q", got)
	}
	if cfg.Store.CommitWait != 750*time.Millisecond {
		t.Errorf("commit_wait: got %v", cfg.Store.CommitWait)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("empty config: warnings %q", w)
	}
	if cfg.MQTT.ReadCoalesce != Duration(5*time.Millisecond) {
		t.Errorf("read_coalesce: got %v", cfg.MQTT.ReadCoalesce)
	}
}

// TestLoadConfig_RemovedCommitKeys: the keys of the commit policy that
// store.commit_wait alone replaced are accepted, whatever their value,
// each with a warning that names it, its line and what replaced it.
func TestLoadConfig_RemovedCommitKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.yaml")
	old := "store:\n  commit_interval: 2ms\n  commit_linger: 200us\n  commit_wait: 1s\n  commit_wait_readings: 128\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatalf("a config of the earlier commit policy: %v", err)
	}
	if cfg.Store.CommitWait != time.Second {
		t.Errorf("commit_wait: got %v, want 1s", cfg.Store.CommitWait)
	}
	got := cfg.Warnings()
	want := []string{"store.commit_interval (line 2)", "store.commit_linger (line 3)", "store.commit_wait_readings (line 5)"}
	if len(got) != len(want) {
		t.Fatalf("warnings: got %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w+": no longer used: ") || !strings.Contains(got[i], "store.commit_wait") {
			t.Errorf("warning %d: got %q, want %q and what replaced it", i, got[i], w)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"check-config", "-config", path}, &stdout, &stderr); err != nil {
		t.Fatalf("check-config: %v", err)
	}
	if !strings.Contains(stderr.String(), path+": warning: store.commit_linger (line 3): no longer used") {
		t.Errorf("check-config's stderr: got %q, want the warnings", stderr.String())
	}
}

func TestParseConfig_External(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader("mqtt:\n  url: tcp://10.0.0.2:1883\n  client_id: gw1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MQTT.Embedded != nil || cfg.MQTT.URL != "tcp://10.0.0.2:1883" {
		t.Errorf("got mqtt %+v, want external broker only", cfg.MQTT)
	}
}

// TestLoadConfig_Bad loads every testdata/*.bad.yaml: each must fail with
// the file name, the key and the reason.
func TestLoadConfig_Bad(t *testing.T) {
	want := map[string]string{
		"unknown_key.bad.yaml":              "mqtt.embeded: unknown key (line 3)",
		"unknown_topic_key.bad.yaml":        "mqtt.topics[0].fromat: unknown key (line 4)",
		"http_listen_not_hostport.bad.yaml": `http.listen: want host:port (got "8080")`,
		"http_open_no_token.bad.yaml":       "http.listen: 0.0.0.0:8080 is not loopback, and without a token anyone on the network could read the API: set http.token_file (see docs/security.md, Opening HTTP to the network), or allow_anonymous: true to let anyone in",
		"http_anonymous_no_hosts.bad.yaml":  "http.allowed_hosts: http.listen 0.0.0.0:8080 is open without a token, which answers only loopback host names and these: list the names clients use to reach it",
		"http_allowed_host_url.bad.yaml":    `http.allowed_hosts[1]: want a host name or an IP address, without scheme or port, such as gateway.local or 192.168.1.20 (got "http://gateway.local:8080")`,
		"http_anonymous_and_token.bad.yaml": "http.allow_anonymous: true, but http.token_file is set: set one or the other",
		"bad_duration.bad.yaml":             `store.commit_wait: must be a duration such as 500ms, 2s or 5m (got "soon") (line 2)`,
		"wrong_type.bad.yaml":               `store.commit_max_readings: must be a whole number (got "lots") (line 2)`,
		"commit_zero.bad.yaml":              "store.commit_max_readings: must be from 1 to 100000 (got 0)",
		"commit_wait_long.bad.yaml":         "store.commit_wait: must be from 0s to 5s (got 10s)",
		"disk_reserve_small.bad.yaml":       "store.disk_reserve: must be auto or from 4MiB to 64GiB (got 1MiB)",
		"max_series_zero.bad.yaml":          "store.max_series: must be from 1 to 10000000 (got 0)",
		"max_states_zero.bad.yaml":          "store.max_states_per_series: must be from 1 to 65536 (got 0)",
		"max_states_huge.bad.yaml":          "store.max_states_per_series: must be from 1 to 65536 (got 100000)",
		"metrics_readings_word.bad.yaml":    `http.metrics_readings: must be true or false (got "sometimes") (line 2)`,
		"topics_map.bad.yaml":               "mqtt.topics: must be a list; each entry starts with '-' (got a block of keys) (line 3)",
		"units_list.bad.yaml":               "mqtt.topics[0].units: must be a block of keys, one 'key: value' a line (got a list) (line 4)",
		"message_rate_word.bad.yaml":        `mqtt.embedded.limits.message_rate: must be a number (got "fast") (line 4)`,
		"anonymous_word.bad.yaml":           `mqtt.embedded.allow_anonymous: must be true or false (got "sometimes") (line 3)`,
		"http_scalar.bad.yaml":              `http: must be a block of keys, one 'key: value' a line (got "8080") (line 1)`,
		"device_tag_pattern.bad.yaml":       "mqtt.topics[0].device_tag: names the device's tag of preset telegraf: set preset: telegraf too",
		"device_tag_preset.bad.yaml":        "mqtt.topics[0].device_tag: only preset telegraf takes a device tag (got preset tasmota)",
		"preset_metrics.bad.yaml":           `mqtt.topics[0].metrics: metric pattern "Wifi.[": syntax error in pattern`,
		"texts_pattern.bad.yaml":            `mqtt.topics[0].texts: metric pattern "mode[": syntax error in pattern`,
		"topics_empty.bad.yaml":             "mqtt.topics: is empty: list at least one pattern or preset, or leave the key out for the default (sensors/{device}/telemetry)",
		"max_payload_word.bad.yaml":         `mqtt.max_payload: cannot use "big" as a size (want bytes, with or without a unit: 1073741824, 256KiB, 500MiB, 8GB) (line 2)`,
		"max_payload_huge.bad.yaml":         "mqtt.max_payload: must be from 16 bytes to 16MiB (got 32MiB)",
		"metrics_readings_series.bad.yaml":  "http.metrics_readings: takes store.max_series of at most 100000, the gauges of a scrape (got 200000)",
		"series_per_device_big.bad.yaml":    "store.max_series_per_device: must be from 1 to store.max_series (500) (got 1000)",
		"keep_recent_negative.bad.yaml":     "retention.keep_recent: must be 0 or more (got -1h0m0s)",
		"clock_trust.bad.yaml":              `clock.trust: must be auto or always (got "sometimes")`,
		"read_coalesce_too_long.bad.yaml":   "mqtt.read_coalesce: must be from 0s to 100ms (got 1s)",
		"both_brokers.bad.yaml":             "mqtt: set either mqtt.embedded",
		"bad_url.bad.yaml":                  `mqtt.url: want tcp://host:port (got "mosquitto:1883")`,
		"open_listener_no_users.bad.yaml":   "mqtt.embedded.listen: 0.0.0.0:1883 is not loopback, where anonymous clients are refused, and no one could log in: set mqtt.embedded.password_file",
		"tls_without_listener.bad.yaml":     "mqtt.embedded.tls: set, but mqtt.embedded.tls_listen is not",
		"packet_below_payload.bad.yaml":     "mqtt.embedded.limits.max_packet_size: must be at least mqtt.max_payload, 65536 (got 1024)",
		"tls_on_tcp_url.bad.yaml":           `mqtt.tls: set, but mqtt.url "tcp://10.0.0.2:1883" is not ssl://`,
		"bad_pattern.bad.yaml":              "mqtt.topics[1].pattern: ",
		"bad_format.bad.yaml":               "mqtt.topics[0].format: ",
		"preset_unknown.bad.yaml":           `mqtt.topics[0].preset: unknown preset "tasmotta" (want one of chirpstack, esphome, homeassistant-statestream, openmqttgateway, senml, shelly, shelly-rpc, tasmota, telegraf, ttn, zigbee2mqtt)`,
		"preset_with_pattern.bad.yaml":      "mqtt.topics[0].pattern: a preset has its own topics: set base_topic to move them, or drop preset to give a pattern",
		"preset_base_topic.bad.yaml":        "mqtt.topics[0].preset: preset esphome: its topics start with the device's name, so it takes no base_topic",
		"time_zone.bad.yaml":                `mqtt.topics[0].time_zone: "Mars/Olympus" is not an IANA time zone such as Europe/Berlin or UTC`,
		"time_format.bad.yaml":              `mqtt.topics[0].time_format: unknown time format "yesterday"`,
		"validate_range.bad.yaml":           "mqtt.topics[0].validate.temp: min 10 is above max 5",
		"mapping_format.bad.yaml":           "mqtt.topics[0].format: mapping options read JSON documents: want json or auto (got influx)",
		"mapping_pattern.bad.yaml":          `mqtt.topics[0].metrics: metric pattern "[a": syntax error in pattern`,
		"bad_level.bad.yaml":                `log.level: must be debug, info, warn or error (got "loud")`,
		"data_dir_list.bad.yaml":            "data_dir: must be a text (put it in quotes if it looks like something else) (got a list) (line 1)",
		"bucket_too_big.bad.yaml":           "store.bucket_samples: 9000 readings do not fit a bucket with store.memtable_mib 1 (at most 7281)",
		"bad_retention.bad.yaml":            `retention.minute_stats_max_age: cannot use "forever" as a duration (want e.g. 90d, 5y, 36h or 0) (line 2)`,
		"disk_cap_small.bad.yaml":           "retention.max_disk_bytes: must be auto, 0 (no cap) or at least 16MiB (got 1000)",
		"disk_cap_word.bad.yaml":            `retention.max_disk_bytes: cannot use "lots" as a size (want bytes, with or without a unit: 1073741824, 256KiB, 500MiB, 8GB) (line 2)`,
		"memory_limit_word.bad.yaml":        `memory_limit_mib: cannot use "lots" as a number of MiB (want auto, 0 or e.g. 64) (line 1)`,
		"memory_limit_negative.bad.yaml":    `memory_limit_mib: cannot use "-1" as a number of MiB (want auto, 0 or e.g. 64) (line 1)`,
		"memory_limit_huge.bad.yaml":        "memory_limit_mib: must be auto, 0 (unset) or a number of MiB up to 1048576 (got 2000000)",
		"syntax.bad.yaml":                   "did not find expected node content",
		"uplink_url.bad.yaml":               `uplink.url: want an http:// or https:// URL (got "victoria:8428/write")`,
		"uplink_format.bad.yaml":            `uplink.format: must be influx, json or prometheus (got "protobuf")`,
		"uplink_measurement.bad.yaml":       `uplink.measurement: line protocol cannot carry a line break, or a backslash at the end or before a comma, an equals sign, a space or a backslash (got "readings\\")`,
		"uplink_auth.bad.yaml":              "uplink.auth: username and password_file go together",
		"uplink_secret_in_url.bad.yaml":     `uplink.url: must not hold credentials (query parameter "p"): use uplink.auth`,
		"uplink_list_name.bad.yaml":         `uplink[0].name: use 1 to 32 of a-z 0-9 _ -, starting with a letter or digit (got "VM 1")`,
		"uplink_list_duplicate.bad.yaml":    `uplink[1].name: "vm" is the name of uplink[0] already: each upstream needs its own`,
		"uplink_list_unnamed.bad.yaml":      "uplink[1].name: must be set: uplink[0] is named default already, the name of an upstream without one",
		"uplink_kind_and_format.bad.yaml":   `uplink[0].format: is kind's earlier name, and kind says influx (got "json"): keep one of them`,
		"uplink_kind.bad.yaml":              `uplink[0].kind: must be influx, json or prometheus (got "protobuf")`,
		"uplink_list_url.bad.yaml":          `uplink[1].url: want an http:// or https:// URL (got "victoria:8428/write")`,
		"uplink_list_no_url.bad.yaml":       "uplink[1].url: must be set: the upstream's write URL",
		"uplink_list_unknown_key.bad.yaml":  "uplink[1].urll: unknown key (line 5)",
		"uplink_list_wrong_type.bad.yaml":   `uplink[0].batch_readings: must be a whole number (got "lots") (line 4)`,
		"uplink_scalar.bad.yaml":            `uplink: must be a list; each entry starts with '-' (got "http://...") (line 1)`,
		"uplink_catch_up.bad.yaml":          `uplink.catch_up: want oldest_first or live_first (got "newest")`,
		"uplink_stats_live_first.bad.yaml":  "uplink[0].catch_up: live_first is for readings: with data: stats the records go period by period, in order",
		"uplink_rate_tiny.bad.yaml":         "uplink.max_bytes_per_second: must be 0 (no limit) or at least 1KiB",
		"uplink_backlog_nopolicy.bad.yaml":  "uplink.max_backlog: 7d drops nothing unless uplink.backlog_policy is drop_oldest",
		"uplink_policy_no_max.bad.yaml":     "uplink.backlog_policy: drop_oldest needs uplink.max_backlog",
		"uplink_max_backlog_word.bad.yaml":  `uplink.max_backlog: cannot use "lots" as a backlog`,
		"uplink_backlog_policy.bad.yaml":    `uplink.backlog_policy: want none or drop_oldest (got "drop_newest")`,
	}
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("got %d bad config files, the table has %d", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			msg, ok := want[filepath.Base(f)]
			if !ok {
				t.Fatalf("no expected message for %s", f)
			}
			_, err := LoadConfig(f)
			if err == nil {
				t.Fatal("got nil error")
			}
			var ce *configError
			if !errors.As(err, &ce) {
				t.Errorf("got %T, want a configError (exit status 78)", err)
			}
			if !strings.HasPrefix(err.Error(), f+": ") {
				t.Errorf("error %q does not start with the file name", err)
			}
			if !strings.Contains(err.Error(), msg) {
				t.Errorf("error %q does not contain %q", err, msg)
			}
		})
	}
}

func TestLoadConfig_Missing(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

func TestLoadConfig_UplinkSecretFiles(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("abc123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "cairn.yaml")
	yaml := "uplink:\n  url: http://127.0.0.1:8086/write?db=x\n  auth:\n    token_file: " + token + "\n    scheme: Token\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.uplinks[0].Authorization; got != "Token abc123" {
		t.Errorf("Authorization: got %q, want the scheme and the file's token", got)
	}
	if cfg.uplinks[0].Gateway == "" {
		t.Error("no gateway id: want the host name")
	}

	// A token others can read stops the start, naming the key, the file
	// and the fix.
	if err := os.Chmod(token, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(cfgPath)
	var ce *configError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "uplink.auth.token_file: "+token+" is readable by group or others") ||
		!strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable token: got %v", err)
	}
}

func TestParseConfig_MaxDiskBytes(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want ByteSize
	}{
		{"auto", AutoBytes},
		{"0", 0},
		{"536870912", 512 << 20},
		{"500MiB", 500 << 20},
		{"8GB", 8e9},
		{"2GiB", 2 << 30},
	} {
		cfg, err := ParseConfig(strings.NewReader("retention:\n  max_disk_bytes: " + tc.yaml + "\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		if got := cfg.Retention.MaxDiskBytes; got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.yaml, got, tc.want)
		}
	}
}

func TestLoadConfig_Presets(t *testing.T) {
	c, err := LoadConfig("testdata/presets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byPreset := map[string]int{}
	for _, r := range c.routes {
		byPreset[r.Preset]++
	}
	if len(byPreset) != 12 || byPreset[""] != 1 {
		t.Errorf("routes by preset: %v, want 11 presets and one pattern", byPreset)
	}
	last := c.routes[len(c.routes)-1]
	if last.Mapping == nil || last.Mapping.DeviceField != "meta.id" || last.Units["power"] != "W" || last.Checks == nil || last.Checks.Required[0] != "power" {
		t.Errorf("mapping route: %+v", last)
	}
	for _, r := range c.routes {
		if r.Preset == "zigbee2mqtt" && !strings.HasPrefix(r.Pattern.String(), "z2m/") {
			t.Errorf("zigbee2mqtt route %s is not under base_topic z2m", r.Pattern)
		}
		if r.Preset == "tasmota" && (r.Zone == nil || r.Zone.String() != "Europe/Berlin") {
			t.Errorf("tasmota route %s: zone %v", r.Pattern, r.Zone)
		}
		// An empty exclude keeps every field; without metrics, the
		// preset's default excludes.
		if r.Preset == "tasmota" && (r.Metrics == nil || r.Metrics.Include != nil || len(r.Metrics.Exclude) != 0) {
			t.Errorf("tasmota route %s: metrics %+v, want none excluded", r.Pattern, r.Metrics)
		}
		if r.Preset == "zigbee2mqtt" && (r.Metrics == nil || !slices.Equal(r.Metrics.Exclude, payload.PresetExclude("zigbee2mqtt"))) {
			t.Errorf("zigbee2mqtt route %s: metrics %+v, want the default excludes", r.Pattern, r.Metrics)
		}
		if r.Preset == "telegraf" && r.DeviceTag != "source" {
			t.Errorf("telegraf route %s: device tag %q, want source", r.Pattern, r.DeviceTag)
		}
	}
}

// TestParseConfig_Upstreams reads uplink: as a list, each entry over the
// defaults and named as written, and as the single block before lists,
// named default; format is kind's earlier name; a block without url is
// no upstream.
func TestParseConfig_Upstreams(t *testing.T) {
	type want struct {
		name, url string
		format    uplink.Format
		gzip      bool
	}
	for _, tc := range []struct {
		yaml string
		want []want
	}{
		{"uplink:\n  url: http://127.0.0.1:8428/write\n", []want{{"default", "http://127.0.0.1:8428/write", uplink.Influx, true}}},
		{"uplink:\n  name: vm\n  format: json\n  url: http://127.0.0.1:8428/write\n", []want{{"vm", "http://127.0.0.1:8428/write", uplink.JSON, true}}},
		{"uplink:\n  gzip: false\n", nil},
		{"uplink: []\n", nil},
		{"uplink:\n", nil},
		{`uplink:
  - name: vm
    url: http://127.0.0.1:8428/write
    gzip: false
  - name: central
    kind: prometheus
    format: prometheus
    url: http://127.0.0.1:9090/api/v1/write
  - kind: json
    url: http://127.0.0.1:8080/ingest
`, []want{
			{"vm", "http://127.0.0.1:8428/write", uplink.Influx, false},
			{"central", "http://127.0.0.1:9090/api/v1/write", uplink.Prometheus, true},
			{"default", "http://127.0.0.1:8080/ingest", uplink.JSON, true},
		}},
	} {
		cfg, err := ParseConfig(strings.NewReader(tc.yaml))
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
			continue
		}
		var got []want
		for i, o := range cfg.uplinks {
			if o.Name != cfg.Uplink[i].Name || o.BatchReadings != 5000 || o.RetryWaitMax != 5*time.Minute {
				t.Errorf("%q: upstream %d: options %+v, want its name and the defaults", tc.yaml, i, o)
			}
			got = append(got, want{o.Name, o.URL, o.Format, o.Gzip})
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got upstreams %+v, want %+v", tc.yaml, got, tc.want)
		}
	}
}
