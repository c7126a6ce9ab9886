package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/uplink"
)

// Config is cairn's configuration file. See README.md for every key.
type Config struct {
	DataDir   string          `yaml:"data_dir"`
	Log       LogConfig       `yaml:"log"`
	MQTT      MQTTConfig      `yaml:"mqtt"`
	HTTP      HTTPConfig      `yaml:"http"`
	Store     StoreConfig     `yaml:"store"`
	Retention RetentionConfig `yaml:"retention"`
	Uplink    Upstreams       `yaml:"uplink"`
	Clock     ClockConfig     `yaml:"clock"`
	// MemoryLimitMiB is the Go runtime's soft memory limit (GOMEMLIMIT);
	// 0 leaves it to the environment; auto (the default) sizes it from the
	// store's memory and the series held open (memory.go).
	MemoryLimitMiB MiBOrAuto `yaml:"memory_limit_mib"`

	// routes are the parsed mqtt.topics, set by Validate.
	routes []gateway.Route
	// uplinks are the upstreams' options, one for each entry of Uplink,
	// set by Validate (format) and loadFiles (TLS and credentials).
	uplinks []*uplink.Options
	// uplinkFiles are digests of each upstream's secret and certificate
	// files, one for each of uplinks, set by loadFiles, so that a reload
	// sees them change.
	uplinkFiles [][sha256.Size]byte
	// secrets are what the security keys' files hold, set by loadFiles.
	secrets secretFiles
}

// ClockConfig is the clock: section.
type ClockConfig struct {
	// Trust says when the clock is trusted: auto (synchronised, or
	// agreeing with the devices' own timestamps; buffer/clock.go) or
	// always (a board with a real-time clock and no NTP).
	Trust string `yaml:"trust"`
}

// LogConfig is the log: section.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}

// MQTTConfig is the mqtt: section. Without url the embedded broker runs;
// with url (and no embedded block) cairn subscribes to that broker.
type MQTTConfig struct {
	Embedded   *EmbeddedConfig `yaml:"embedded"`
	URL        string          `yaml:"url"`
	ClientID   string          `yaml:"client_id"`
	Topics     []TopicConfig   `yaml:"topics"`
	MaxPayload ByteSize        `yaml:"max_payload"` // bytes, or with a unit: 256KiB
	// MaxFutureSkew is how far ahead of the gateway's clock a reading may
	// be; 0 means no limit.
	MaxFutureSkew Duration `yaml:"max_future_skew"`
	// ReadCoalesce is how long a busy connection's messages may gather
	// before they are read, on either broker.
	ReadCoalesce Duration `yaml:"read_coalesce"`
	// Username and PasswordFile log in at an external broker; TLS is its
	// ssl:// connection.
	Username     string    `yaml:"username"`
	PasswordFile string    `yaml:"password_file"`
	TLS          TLSConfig `yaml:"tls"`
}

// TopicConfig is one entry of mqtt.topics: a pattern and how to read its
// messages, or a preset (docs/devices.md).
type TopicConfig struct {
	Pattern   string `yaml:"pattern"`
	Format    string `yaml:"format"`
	Preset    string `yaml:"preset"`
	BaseTopic string `yaml:"base_topic"`
	// TimeZone is the IANA zone of times without an offset ("UTC",
	// "Local", "Europe/Berlin").
	TimeZone string `yaml:"time_zone"`

	// A mapping, for JSON documents that carry their own ids
	// (payload.Mapping).
	DeviceField string        `yaml:"device_field"`
	TimeField   string        `yaml:"time_field"`
	TimeFormat  string        `yaml:"time_format"`
	ValueField  string        `yaml:"value_field"`
	MetricField string        `yaml:"metric_field"`
	UnitField   string        `yaml:"unit_field"`
	StripPrefix string        `yaml:"strip_prefix"`
	Metrics     MetricsFilter `yaml:"metrics"`
	// Texts are metric patterns whose values are texts: their state
	// words ("off", "ON") are texts, not 0 and 1 (payload.Route.Texts).
	Texts []string `yaml:"texts"`
	// DeviceTag is the line protocol tag that names the device, for
	// preset telegraf (default host).
	DeviceTag string `yaml:"device_tag"`

	// Units are units by metric name; they win over a payload's or preset's.
	Units map[string]string `yaml:"units"`
	// Validate are limits by metric name.
	Validate map[string]MetricCheck `yaml:"validate"`
}

// MetricsFilter selects readings by metric name (path.Match patterns).
type MetricsFilter struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

// MetricCheck is what the readings of one metric must keep.
type MetricCheck struct {
	Min      *float64 `yaml:"min"`
	Max      *float64 `yaml:"max"`
	Required bool     `yaml:"required"`
}

// hasMapping reports whether t sets any mapping option.
func (t *TopicConfig) hasMapping() bool {
	return t.DeviceField != "" || t.TimeField != "" || t.TimeFormat != "" || t.ValueField != "" ||
		t.MetricField != "" || t.UnitField != "" || t.StripPrefix != ""
}

// StoreConfig is the store: section.
type StoreConfig struct {
	CommitMaxReadings int `yaml:"commit_max_readings"`
	// CommitWait is how long a group commit may wait for other sensors'
	// readings to join it (buffer.WriterOptions.Wait).
	CommitWait time.Duration `yaml:"commit_wait"`
	// Keys of the commit policy before it, accepted with a warning
	// (removed.go).
	OldCommitInterval     yaml.Node     `yaml:"commit_interval"`
	OldCommitLinger       yaml.Node     `yaml:"commit_linger"`
	OldCommitWaitReadings yaml.Node     `yaml:"commit_wait_readings"`
	BucketSamples         int           `yaml:"bucket_samples"`
	SealIdle              time.Duration `yaml:"seal_idle"`
	MemTableMiB           int           `yaml:"memtable_mib"`
	CacheMiB              int           `yaml:"cache_mib"`
	// DiskReserve is the free space on the data directory's file system
	// below which ingest pauses (auto: buffer.DefaultDiskReserve).
	DiskReserve ByteSize `yaml:"disk_reserve"`
	// MaxSeries caps the series of the store, MaxSeriesPerDevice those
	// of one device: a reading that would make a new series over either
	// is refused (reason too_many_series). See defaultMaxSeries.
	MaxSeries          int `yaml:"max_series"`
	MaxSeriesPerDevice int `yaml:"max_series_per_device"`
	// MaxStatesPerSeries caps the distinct texts of a text series: a
	// reading with a new text beyond it is refused (reason
	// too_many_states). See checkMaxStates.
	MaxStatesPerSeries int `yaml:"max_states_per_series"`
}

// defaultMaxSeries is store.max_series by default, sized for a board of
// 512 MB. A series costs 688 bytes of heap with one reading, 468 once
// loaded at a restart (BenchmarkSeriesMemory at 100k series), and up to
// about 4 KiB more while a full open bucket of 200 readings waits to be
// sealed; the auto memory limit counts 8.25 KiB (autoMemoryLimit). At
// 20,000 series that is 161 MiB at most, 175 MiB with the base's 14
// MiB: within the three quarters of 512 MB the limit may take
// (memoryCeiling), with room left for the runtime's garbage. A flood of
// new series, one reading each, stops at 20,000 × 688 bytes = 13 MiB.
const defaultMaxSeries = 20000

// maxMaxSeries bounds store.max_series: 10 million series would take
// 6.5 GiB at the least.
const maxMaxSeries = 10_000_000

// RetentionConfig is the retention: section.
type RetentionConfig struct {
	RawMaxAge         Duration `yaml:"raw_max_age"`
	MinuteStatsMaxAge Duration `yaml:"minute_stats_max_age"`
	HourStatsMaxAge   Duration `yaml:"hour_stats_max_age"`
	DayStatsMaxAge    Duration `yaml:"day_stats_max_age"`
	// RawMaxReadingsPerSeries keeps the newest readings of each series,
	// this many (0: no limit).
	RawMaxReadingsPerSeries int `yaml:"raw_max_readings_per_series"`
	// RawWindowFromLatest keeps the readings within this long of their
	// series' newest one (0: no limit).
	RawWindowFromLatest Duration `yaml:"raw_window_from_latest"`
	// MaxDiskBytes caps the data directory (0: no cap; auto: 70% of the
	// free space at first start, remembered in the store).
	MaxDiskBytes ByteSize `yaml:"max_disk_bytes"`
	// KeepRecent is how much of each series' newest readings the disk
	// cap keeps while anything older is left.
	KeepRecent Duration `yaml:"keep_recent"`
}

// ByteSize is a number of bytes in the configuration file: a plain
// integer, or one with a unit (KiB, MiB, GiB, TiB; KB, MB, GB, TB), or
// "auto" (AutoBytes), whose meaning the key defines.
type ByteSize int64

// AutoBytes is ByteSize "auto".
const AutoBytes ByteSize = -1

// UnmarshalYAML decodes a ByteSize.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseByteSize(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot use %q as a size (want bytes, with or without a unit: 1073741824, 256KiB, 500MiB, 8GB)", n.Line, n.Value)}}
	}
	*b = v
	return nil
}

func parseByteSize(s string) (ByteSize, error) {
	if s == "auto" {
		return AutoBytes, nil
	}
	units := []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"", 1}}
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil || n < 0 || n > (1<<62)/u.n {
			return 0, fmt.Errorf("bad size %q", s)
		}
		return ByteSize(n * u.n), nil
	}
	return 0, fmt.Errorf("bad size %q", s)
}

// String formats b as the file would have it.
func (b ByteSize) String() string {
	switch {
	case b == AutoBytes:
		return "auto"
	case b > 0 && b%(1<<30) == 0:
		return strconv.FormatInt(int64(b>>30), 10) + "GiB"
	case b > 0 && b%(1<<20) == 0:
		return strconv.FormatInt(int64(b>>20), 10) + "MiB"
	}
	return strconv.FormatInt(int64(b), 10)
}

// MiBOrAuto is a whole number of MiB in the configuration file, or "auto"
// (AutoMiB), whose meaning the key defines.
type MiBOrAuto int

// AutoMiB is MiBOrAuto "auto".
const AutoMiB MiBOrAuto = -1

// maxMemoryLimitMiB is the largest memory_limit_mib: 1 TiB.
const maxMemoryLimitMiB = 1 << 20

// UnmarshalYAML decodes a MiBOrAuto.
func (m *MiBOrAuto) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*m = AutoMiB
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < 0 || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot use %q as a number of MiB (want auto, 0 or e.g. 64)", n.Line, n.Value)}}
	}
	*m = MiBOrAuto(v)
	return nil
}

// String formats m as the file would have it.
func (m MiBOrAuto) String() string {
	if m == AutoMiB {
		return "auto"
	}
	return strconv.Itoa(int(m))
}

// UplinkConfig is one upstream: an entry of the uplink: list, or the
// uplink: section itself (upstreams.go).
type UplinkConfig struct {
	// Name names the upstream's cursor in the store's log, its metrics
	// and its status (default: default).
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Kind is what the upstream speaks: influx | json | prometheus.
	// Format is its earlier name, still taken.
	Kind          string        `yaml:"kind"`
	Format        string        `yaml:"format"`
	Measurement   string        `yaml:"measurement"` // line protocol measurement
	GatewayID     string        `yaml:"gateway_id"`  // default: the host name
	Data          string        `yaml:"data"`        // readings (also when empty) | stats
	Group         string        `yaml:"group"`       // minute | hour, with data: stats
	BatchReadings int           `yaml:"batch_readings"`
	BatchBytes    int           `yaml:"batch_bytes"`
	Interval      time.Duration `yaml:"interval"`
	MaxAge        Duration      `yaml:"max_age"`
	Timeout       time.Duration `yaml:"timeout"`
	RetryWaitMin  time.Duration `yaml:"retry_wait_min"`
	RetryWaitMax  time.Duration `yaml:"retry_wait_max"`
	RetryAfterMax time.Duration `yaml:"retry_after_max"`
	Gzip          bool          `yaml:"gzip"`
	TLS           TLSConfig     `yaml:"tls"`
	Auth          AuthConfig    `yaml:"auth"`

	// With Bucket, format influx writes to InfluxDB 2.x: url is the
	// server's address and cairn posts to its /api/v2/write with org and
	// bucket (uplink.InfluxV2URL).
	Org    string `yaml:"org"`
	Bucket string `yaml:"bucket"`

	// MaxBytesPerSecond caps the request bodies as posted (after
	// compression); 0: no limit.
	MaxBytesPerSecond ByteSize `yaml:"max_bytes_per_second"`

	// After an outage (docs/uplink.md): what goes first, and how much
	// backlog the upstream may hold, with what happens beyond it.
	CatchUp       string  `yaml:"catch_up"`       // oldest_first | live_first
	MaxBacklog    Backlog `yaml:"max_backlog"`    // an age (7d) or a size (500MB)
	BacklogPolicy string  `yaml:"backlog_policy"` // none | drop_oldest

	// The keys of kind mqtt (upstream_mqtt.go).
	MQTTUplinkConfig `yaml:",inline"`
	// Azure logs in to Azure IoT Hub as a device (upstream_azure.go).
	Azure AzureConfig `yaml:"azure"`

	// key is where the file has it: "uplink", or "uplink[1]" in a list.
	key string
}

// AuthConfig is the uplink.auth: section. Secrets live in files (or in
// systemd credentials), never in this file.
type AuthConfig struct {
	TokenFile    string `yaml:"token_file"` // Authorization: <scheme> <token>
	Scheme       string `yaml:"scheme"`     // Bearer, or Token for InfluxDB 2
	Username     string `yaml:"username"`   // basic auth, with password_file
	PasswordFile string `yaml:"password_file"`
}

// Duration is a time.Duration in the configuration file. Besides Go's
// units (h, m, s, …) it takes whole days and years: "90d", "5y" (a year is
// 365 days). "0" means for ever.
type Duration time.Duration

// UnmarshalYAML decodes a Duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot use %q as a duration (want e.g. 90d, 5y, 36h or 0)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	const day = 24 * time.Hour
	for suffix, unit := range map[string]time.Duration{"d": day, "y": 365 * day} {
		if num, ok := strings.CutSuffix(s, suffix); ok {
			n, err := strconv.ParseUint(num, 10, 16)
			if err != nil {
				return 0, err
			}
			return time.Duration(n) * unit, nil
		}
	}
	if s == "0" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// String formats d as the file would have it, in days or years when whole.
func (d Duration) String() string {
	const day = 24 * time.Hour
	switch v := time.Duration(d); {
	case v == 0:
		return "0"
	case v%(365*day) == 0:
		return strconv.FormatInt(int64(v/(365*day)), 10) + "y"
	case v%day == 0:
		return strconv.FormatInt(int64(v/day), 10) + "d"
	default:
		return v.String()
	}
}

// Defaults.
const (
	defaultEmbeddedListen = "127.0.0.1:1883"
	defaultPattern        = "sensors/{device}/telemetry"
)

// defaultReadCoalesce is mqtt.read_coalesce's default: at a steady
// 10,000 messages a second from one client, reading a millisecond's
// messages at a time once took cairn from about 22.6% of a core to 15.3%;
// with later changes, two milliseconds' took 6.1% against 7.3% at one
// (five interleaved rounds, docs/performance.md); with commits that
// gather for 50 ms (buffer's gatherFloor), five took 9.85% against 10.7%
// at two, and `cairn sim` with 100 messages in flight, against the
// embedded broker, got more through in most runs. A read after cairn
// wrote to the connection does not wait (gatherConn), so a client that
// waits for each PUBACK mostly has its next message read at once
// (PUBACK median 0.29 ms, 2.41 without that); a client publishing as
// fast as its messages in flight allow waits up to a window for the
// rest of each window (docs/raspberry-pi.md).
const (
	defaultReadCoalesce = 5 * time.Millisecond
	maxReadCoalesce     = 100 * time.Millisecond
)

// DefaultConfig returns the configuration that an empty file means.
func DefaultConfig() *Config {
	return &Config{
		DataDir: "./data",
		Log:     LogConfig{Level: "info", Format: "text"},
		MQTT: MQTTConfig{
			Embedded:      defaultEmbedded(),
			ClientID:      "cairn",
			MaxPayload:    64 << 10,
			MaxFutureSkew: Duration(time.Hour),
			ReadCoalesce:  Duration(defaultReadCoalesce),
		},
		HTTP: HTTPConfig{Listen: "127.0.0.1:8080", QueryRate: 100},
		Retention: RetentionConfig{
			RawMaxAge:         Duration(7 * 24 * time.Hour),
			MinuteStatsMaxAge: Duration(90 * 24 * time.Hour),
			HourStatsMaxAge:   Duration(5 * 365 * 24 * time.Hour),
			DayStatsMaxAge:    Duration(5 * 365 * 24 * time.Hour),
			MaxDiskBytes:      AutoBytes,
			KeepRecent:        Duration(time.Hour),
		},
		Clock: ClockConfig{Trust: "auto"},
		Store: StoreConfig{
			CommitMaxReadings:  10000,
			CommitWait:         750 * time.Millisecond,
			BucketSamples:      200,
			SealIdle:           time.Hour,
			MemTableMiB:        2,
			CacheMiB:           4,
			DiskReserve:        AutoBytes,
			MaxSeries:          defaultMaxSeries,
			MaxSeriesPerDevice: 1000,
			MaxStatesPerSeries: buffer.DefaultMaxStates,
		},
		MemoryLimitMiB: AutoMiB,
	}
}

// defaultUplink returns what an upstream's keys are when the file does not
// give them.
func defaultUplink() UplinkConfig {
	return UplinkConfig{
		Measurement:   "readings",
		BatchReadings: 5000,
		BatchBytes:    1 << 20,
		Interval:      time.Second,
		Timeout:       30 * time.Second,
		RetryWaitMin:  time.Second,
		RetryWaitMax:  5 * time.Minute,
		RetryAfterMax: 10 * time.Minute,
		Gzip:          true,
		Auth:          AuthConfig{Scheme: "Bearer"},
		CatchUp:       "oldest_first",
		BacklogPolicy: "none",
	}
}

// minBytesPerSecond is the least uplink.max_bytes_per_second: below it a
// batch of a few readings waits for minutes.
const minBytesPerSecond ByteSize = 1 << 10

// The bounds of store.disk_reserve: below a few MiB Badger could not
// finish a flush, and above 64 GiB it is surely a typo.
const (
	minDiskReserve ByteSize = 4 << 20
	maxDiskReserve ByteSize = 64 << 30
)

// configError is a configuration that cannot run; main exits with 78
// (EX_CONFIG) for it, so that systemd does not restart in a loop.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// LoadConfig reads, decodes and validates the file at path. Its errors name
// the file, the key and the reason.
func LoadConfig(path string) (*Config, error) {
	cfg, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.loadFiles(); err != nil {
		return nil, &configError{fmt.Errorf("%s: %w", path, err)}
	}
	return cfg, nil
}

// readConfigFile decodes and validates the file at path and makes its
// relative paths absolute against its folder, without reading the files
// it names (LoadConfig does). Its errors name the file, the key and the
// reason.
func readConfigFile(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &configError{fmt.Errorf("config: %w", err)}
	}
	defer f.Close()
	cfg, err := ParseConfig(f)
	if err != nil {
		return nil, &configError{fmt.Errorf("%s: %w", path, err)}
	}
	cfg.resolvePaths(configDir(path))
	return cfg, nil
}

// configDir returns the folder of the configuration file at path, against
// which its relative paths are resolved: absolute where it can be made so.
func configDir(path string) string {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return filepath.Dir(path)
	}
	return dir
}

// loadFiles reads the files the configuration names (TLS certificates,
// secrets), so that a missing or unsafe one stops the start with its key.
func (c *Config) loadFiles() error {
	if err := c.loadSecurityFiles(); err != nil {
		return err
	}
	c.uplinkFiles = nil
	var errs []error
	for i, u := range c.uplinks {
		var digest [sha256.Size]byte
		errs = append(errs, c.Uplink[i].loadFiles(u, &digest))
		c.uplinkFiles = append(c.uplinkFiles, digest)
	}
	return errors.Join(errs...)
}

// loadFiles reads the token, password and certificate files of the
// upstream c into u, and their digest into digest.
func (c *UplinkConfig) loadFiles(u *uplink.Options, digest *[sha256.Size]byte) error {
	a := c.Auth
	var errs []error
	if a.TokenFile != "" {
		token, err := readSecret(a.TokenFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.auth.token_file: %w", c.keyPath(), err))
		}
		u.Authorization = a.Scheme + " " + string(token)
	}
	if a.PasswordFile != "" {
		pw, err := readSecret(a.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.auth.password_file: %w", c.keyPath(), err))
		}
		u.Password = string(pw)
	}
	if err := c.loadAzureKey(u); err != nil {
		errs = append(errs, err)
	}
	h := sha256.New()
	for _, f := range []string{a.TokenFile, a.PasswordFile, c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, c.Azure.KeyFile} {
		if b, err := os.ReadFile(secretPath(f)); err == nil {
			h.Write(b)
		}
		h.Write([]byte{0})
	}
	h.Sum(digest[:0])
	if p, err := url.Parse(c.URL); err == nil && (p.Scheme == "https" || p.Scheme == "mqtts" || p.Scheme == "wss") { // Parse lowers the scheme
		tc, err := c.TLS.clientConfig()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.tls: %w", c.keyPath(), err))
		}
		u.TLS = tc
	}
	return errors.Join(errs...)
}

// ParseConfig decodes YAML strictly (an unknown key is an error) over
// DefaultConfig and validates the result.
func ParseConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	paths := keyPaths(&root)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, explainYAMLError(err, paths, containerPaths(&root))
	}
	if !slices.Contains(slices.Collect(maps.Values(paths)), "mqtt.embedded") {
		cfg.MQTT.Embedded = nil // the default one, unless mqtt.url is unset
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

var (
	lineRE    = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRE = regexp.MustCompile(`^field (\S+) not found in type`)
)

// explainYAMLError turns the decoder's "line N: …" messages into
// "key.path: reason (line N)".
func explainYAMLError(err error, paths map[int]string, containers map[nodeAt]string) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		m := lineRE.FindStringSubmatch(e)
		if m == nil {
			msgs = append(msgs, e)
			continue
		}
		line, _ := strconv.Atoi(m[1]) // the regexp matched digits
		reason := m[2]
		key := paths[line]
		if u := unknownRE.FindStringSubmatch(reason); u != nil {
			reason = "unknown key"
		} else if msg, kind, ok := explainTypeError(reason); ok {
			reason = msg
			if p, ok := containers[nodeAt{line, kind}]; ok {
				key = p
			}
		}
		if key == "" {
			key = "line " + m[1]
			msgs = append(msgs, fmt.Sprintf("%s: %s", key, reason))
			continue
		}
		msgs = append(msgs, fmt.Sprintf("%s: %s (line %d)", key, reason, line))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// keyPaths maps each line of a YAML document to the path of the key or
// sequence item that starts there, like "mqtt.topics[0].format".
func keyPaths(root *yaml.Node) map[int]string {
	paths := make(map[int]string)
	walkYAML(root, func(n, key *yaml.Node, path string) {
		switch {
		case key != nil:
			paths[key.Line] = path
		case path != "": // a sequence item
			if _, ok := paths[n.Line]; !ok { // a key on the line names it better
				paths[n.Line] = path
			}
		}
	})
	return paths
}

// walkYAML calls visit for root and every node under it, parents first,
// with its key path ("mqtt.topics[0].format"; "" for the document and
// its top node); key is the key of a map's value, nil for anything else.
func walkYAML(root *yaml.Node, visit func(n, key *yaml.Node, path string)) {
	var walk func(n, key *yaml.Node, path string)
	walk = func(n, key *yaml.Node, path string) {
		visit(n, key, path)
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, nil, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + p
				}
				walk(n.Content[i+1], k, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, nil, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(root, nil, "")
}

// Validate checks every value and fills in what is derived from them. Its
// errors name the key, the reason and the value.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data_dir", "must not be empty")
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level", "%v", err)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "must be text or json (got %q)", c.Log.Format)
	}
	m := &c.MQTT
	switch {
	case m.URL != "" && m.Embedded != nil:
		bad("mqtt", "set either mqtt.embedded (the embedded broker) or mqtt.url (an external broker), not both")
	case m.URL == "" && m.Embedded == nil:
		m.Embedded = defaultEmbedded()
	}
	if m.Embedded != nil {
		c.validateEmbedded(bad)
	}
	c.validateSecurity(bad)
	if m.URL != "" {
		if err := checkBrokerURL(m.URL); err != nil {
			bad("mqtt.url", "%v", err)
		}
	}
	if m.ClientID == "" {
		bad("mqtt.client_id", "must not be empty")
	}
	if m.MaxFutureSkew < 0 {
		bad("mqtt.max_future_skew", "must be 0 (no limit) or more (got %s)", m.MaxFutureSkew)
	}
	if m.ReadCoalesce < 0 || m.ReadCoalesce > Duration(maxReadCoalesce) {
		bad("mqtt.read_coalesce", "must be from 0s to %s (got %s)", Duration(maxReadCoalesce), m.ReadCoalesce)
	}
	if m.MaxPayload < 16 || m.MaxPayload > 16<<20 {
		bad("mqtt.max_payload", "must be from 16 bytes to 16MiB (got %s)", m.MaxPayload)
	}
	if m.Topics != nil && len(m.Topics) == 0 {
		bad("mqtt.topics", "is empty: list at least one pattern or preset, or leave the key out for the default (%s)", defaultPattern)
	}
	if m.Topics == nil {
		m.Topics = []TopicConfig{{Pattern: defaultPattern, Format: "auto"}}
	}
	c.routes = c.routes[:0]
	for i := range m.Topics {
		c.routes = append(c.routes, topicRoutes(&m.Topics[i], fmt.Sprintf("mqtt.topics[%d]", i), bad)...)
	}
	if err := checkHostPort(c.HTTP.Listen); err != nil {
		bad("http.listen", "%v", err)
	}
	s := c.Store
	if s.CommitMaxReadings < 1 || s.CommitMaxReadings > 100000 {
		bad("store.commit_max_readings", "must be from 1 to 100000 (got %d)", s.CommitMaxReadings)
	}
	if s.CommitWait < 0 || s.CommitWait > 5*time.Second {
		bad("store.commit_wait", "must be from 0s to 5s (got %s)", s.CommitWait)
	}
	if s.BucketSamples < 2 || s.BucketSamples > buffer.MaxBucketSamples {
		bad("store.bucket_samples", "must be from 2 to %d (got %d)", buffer.MaxBucketSamples, s.BucketSamples)
	}
	// A bucket takes up to ~18 bytes a reading (random full-precision
	// values) and must stay under the store's value limit, 1/8 of the
	// memtable.
	if s.BucketSamples*18 > s.MemTableMiB<<20/8 && s.MemTableMiB >= 1 {
		bad("store.bucket_samples", "%d readings do not fit a bucket with store.memtable_mib %d (at most %d)", s.BucketSamples, s.MemTableMiB, s.MemTableMiB<<20/8/18)
	}
	if s.SealIdle < time.Minute {
		bad("store.seal_idle", "must be at least 1m (got %s)", s.SealIdle)
	}
	if s.MemTableMiB < 1 || s.MemTableMiB > 256 {
		bad("store.memtable_mib", "must be from 1 to 256 (got %d)", s.MemTableMiB)
	}
	if s.CacheMiB < 1 || s.CacheMiB > 1024 {
		bad("store.cache_mib", "must be from 1 to 1024 (got %d)", s.CacheMiB)
	}
	if s.DiskReserve != AutoBytes && (s.DiskReserve < minDiskReserve || s.DiskReserve > maxDiskReserve) {
		bad("store.disk_reserve", "must be auto or from %s to %s (got %s)", minDiskReserve, maxDiskReserve, s.DiskReserve)
	}
	if s.MaxSeries < 1 || s.MaxSeries > maxMaxSeries {
		bad("store.max_series", "must be from 1 to %d (got %d)", maxMaxSeries, s.MaxSeries)
	}
	if s.MaxSeriesPerDevice < 1 || s.MaxSeriesPerDevice > max(s.MaxSeries, 1) {
		bad("store.max_series_per_device", "must be from 1 to store.max_series (%d) (got %d)", s.MaxSeries, s.MaxSeriesPerDevice)
	}
	checkMaxStates(s, bad)
	r := c.Retention
	for _, a := range []struct {
		key string
		d   Duration
	}{{"raw_max_age", r.RawMaxAge}, {"raw_window_from_latest", r.RawWindowFromLatest}, {"minute_stats_max_age", r.MinuteStatsMaxAge}, {"hour_stats_max_age", r.HourStatsMaxAge}, {"day_stats_max_age", r.DayStatsMaxAge}} {
		if a.d < 0 || (a.d > 0 && time.Duration(a.d) < time.Hour) {
			bad("retention."+a.key, "must be 0 (for ever) or at least 1h (got %s)", a.d)
		}
	}
	if r.KeepRecent < 0 {
		bad("retention.keep_recent", "must be 0 or more (got %s)", r.KeepRecent)
	}
	if r.RawMaxReadingsPerSeries < 0 {
		bad("retention.raw_max_readings_per_series", "must be 0 (no limit) or more (got %d)", r.RawMaxReadingsPerSeries)
	}
	if r.MaxDiskBytes < AutoBytes || (r.MaxDiskBytes > 0 && r.MaxDiskBytes < buffer.MinDiskBytes) {
		bad("retention.max_disk_bytes", "must be auto, 0 (no cap) or at least %s (got %s)", ByteSize(buffer.MinDiskBytes), r.MaxDiskBytes)
	}
	c.validateUplinks(bad)
	if t := c.Clock.Trust; t != "auto" && t != "always" {
		bad("clock.trust", "must be auto or always (got %q)", t)
	}
	if c.MemoryLimitMiB < AutoMiB || c.MemoryLimitMiB > maxMemoryLimitMiB {
		bad("memory_limit_mib", "must be auto, 0 (unset) or a number of MiB up to %d (got %d)", maxMemoryLimitMiB, c.MemoryLimitMiB)
	}
	return errors.Join(errs...)
}

// validateUplink checks the upstream u and returns its options. Its
// errors name u's keys where the file has them ("uplink.url",
// "uplink[1].url"): bad's keys "uplink.<key>" are reported so.
func validateUplink(u *UplinkConfig, report func(key, format string, a ...any)) *uplink.Options {
	bad := func(k, format string, a ...any) {
		report(u.keyPath()+strings.TrimPrefix(k, "uplink"), format, a...)
	}
	parsed, err := url.Parse(u.URL)
	if u.URL == "" {
		bad("uplink.url", "must be set: the upstream's write URL, such as http://127.0.0.1:8428/write")
	} else if u.isMQTT() && (err != nil || !uplink.IsMQTTURL(u.URL) || parsed.Host == "" || parsed.Port() == "") {
		bad("uplink.url", "kind mqtt wants mqtt://host:port, mqtts://host:port, ws://host:port/path or wss://host:port/path (got %q)", u.URL)
	} else if !u.isMQTT() && (err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "") {
		bad("uplink.url", "want an http:// or https:// URL (got %q)", u.URL)
	} else if parsed.User != nil {
		bad("uplink.url", "must not hold credentials: use uplink.auth.username and password_file")
	} else {
		for k := range parsed.Query() {
			switch strings.ToLower(k) {
			case "p", "password", "token", "apikey", "api_key", "secret":
				bad("uplink.url", "must not hold credentials (query parameter %q): use uplink.auth, whose secrets live in files", k)
			}
		}
	}
	validateMQTTScheme(u, bad)
	format, err := uplink.ParseFormat(u.kind())
	if u.isMQTT() {
		format, err = uplink.JSON, nil
	}
	switch {
	case u.Kind != "" && u.Format != "" && u.Kind != u.Format:
		bad("uplink.format", "is kind's earlier name, and kind says %s (got %q): keep one of them", u.Kind, u.Format)
	case err != nil && u.Kind != "":
		bad("uplink.kind", "%v", err)
	case err != nil:
		bad("uplink.format", "%v", err)
	}
	if u.GatewayID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "cairn"
		}
		u.GatewayID = host
	}
	if !gateway.ValidAccount(u.GatewayID) {
		bad("uplink.gateway_id", "use 1 to 64 of A-Z a-z 0-9 _ . : - (got %q)", u.GatewayID)
	}
	if u.Measurement == "" {
		bad("uplink.measurement", "must not be empty")
	} else if !uplink.WritableName(u.Measurement) {
		bad("uplink.measurement", "line protocol cannot carry a line break, or a backslash at the end or before a comma, an equals sign, a space or a backslash (got %q)", u.Measurement)
	}
	data, group := validateUplinkData(*u, bad)
	if u.BatchReadings < 1 || u.BatchReadings > 100000 {
		bad("uplink.batch_readings", "must be from 1 to 100000 (got %d)", u.BatchReadings)
	}
	if u.BatchBytes < 1<<10 || u.BatchBytes > 64<<20 {
		bad("uplink.batch_bytes", "must be from 1 KiB to 64 MiB (got %d)", u.BatchBytes)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"interval", u.Interval}, {"timeout", u.Timeout}, {"retry_wait_min", u.RetryWaitMin}, {"retry_wait_max", u.RetryWaitMax}, {"retry_after_max", u.RetryAfterMax}} {
		if d.v <= 0 {
			bad("uplink."+d.key, "must be more than 0 (got %s)", d.v)
		}
	}
	if u.RetryWaitMax < u.RetryWaitMin {
		bad("uplink.retry_wait_max", "must not be below retry_wait_min (%s < %s)", u.RetryWaitMax, u.RetryWaitMin)
	}
	if u.MaxAge < 0 {
		bad("uplink.max_age", "must be 0 (no limit) or more (got %s)", u.MaxAge)
	}
	if err := u.TLS.validate("uplink.tls"); err != nil {
		bad("uplink.tls", "%v", err)
	}
	if (u.Auth.Username == "") != (u.Auth.PasswordFile == "") {
		bad("uplink.auth", "username and password_file go together")
	}
	if u.Auth.TokenFile != "" && u.Auth.Username != "" {
		bad("uplink.auth", "set token_file or username, not both")
	}
	if u.Auth.Scheme == "" || strings.ContainsAny(u.Auth.Scheme, " \t\r\n") {
		bad("uplink.auth.scheme", "must be one word, such as Bearer or Token (got %q)", u.Auth.Scheme)
	}
	catchUp, maxBacklog := catchUpOptions(*u, bad)
	opts := &uplink.Options{
		Name:          u.Name,
		URL:           u.URL,
		Format:        format,
		Measurement:   u.Measurement,
		Gateway:       u.GatewayID,
		Data:          data,
		Group:         group,
		BatchReadings: u.BatchReadings,
		BatchBytes:    u.BatchBytes,
		Interval:      u.Interval,
		MaxAge:        time.Duration(u.MaxAge),
		Timeout:       u.Timeout,
		RetryWaitMin:  u.RetryWaitMin,
		RetryWaitMax:  u.RetryWaitMax,
		RetryAfterMax: u.RetryAfterMax,
		Gzip:          u.Gzip,
		Username:      u.Auth.Username,
		CatchUp:       catchUp,
		MaxBacklog:    maxBacklog,
	}
	opts.MaxBytesPerSecond = int64(u.MaxBytesPerSecond)
	switch {
	case u.MaxBytesPerSecond < 0:
		bad("uplink.max_bytes_per_second", "must be 0 (no limit) or a number of bytes, such as 2000 or 16KiB (got %s)", u.MaxBytesPerSecond)
	case u.MaxBytesPerSecond > 0 && u.MaxBytesPerSecond < minBytesPerSecond:
		bad("uplink.max_bytes_per_second", "must be 0 (no limit) or at least 1KiB: below that a batch of a few readings waits for minutes (got %s)", u.MaxBytesPerSecond)
	}
	validateMQTTUplink(u, opts, data, bad)
	validateAzureUplink(u, opts, bad)
	if data == uplink.Stats && catchUp == uplink.LiveFirst {
		bad("uplink.catch_up", "live_first is for readings: with data: stats the records go period by period, in order (leave catch_up out)")
	}
	switch {
	case u.Bucket == "" && u.Org != "":
		bad("uplink.org", "goes with uplink.bucket, InfluxDB 2.x's (got org %q and no bucket)", u.Org)
	case u.Bucket != "" && format != uplink.Influx:
		bad("uplink.bucket", "only kind influx writes to a bucket (InfluxDB 2.x's /api/v2/write); kind %s posts to uplink.url as it is", format)
	case u.Bucket != "" && parsed != nil:
		v2, err := uplink.InfluxV2URL(u.URL, u.Org, u.Bucket)
		if err != nil {
			bad("uplink.url", "%v", err)
		}
		opts.URL = v2
	}
	return opts
}

// validateUplinkData checks uplink.data and uplink.group.
func validateUplinkData(u UplinkConfig, bad func(key, format string, a ...any)) (uplink.Data, aggregate.Level) {
	data, err := uplink.ParseData(u.Data)
	if err != nil {
		bad("uplink.data", "%v", err)
		return data, 0
	}
	if data != uplink.Stats {
		if u.Group != "" {
			bad("uplink.group", "only with data: stats (got %q with data: %s)", u.Group, data)
		}
		return data, 0
	}
	if u.Group == "" {
		bad("uplink.group", "data: stats sends one record per series and period: say minute or hour")
		return data, 0
	}
	group, err := uplink.ParseGroup(u.Group)
	if err != nil {
		bad("uplink.group", "%v", err)
	}
	return data, group
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port (got %q)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port in %q", s)
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return fmt.Errorf("host must be an IP address or localhost (got %q)", host)
	}
	return nil
}

func checkBrokerURL(s string) error {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "tcp" && scheme != "mqtt" && scheme != "ssl" && scheme != "tls" && scheme != "mqtts") {
		return fmt.Errorf("want tcp://host:port (got %q)", s)
	}
	if _, _, err := net.SplitHostPort(rest); err != nil {
		return fmt.Errorf("want tcp://host:port (got %q)", s)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil || strings.ContainsAny(s, "+-") {
		return 0, fmt.Errorf("must be debug, info, warn or error (got %q)", s)
	}
	return l, nil
}

// topicRoutes returns the routes of one mqtt.topics entry, reporting each
// problem to bad under key.
func topicRoutes(t *TopicConfig, key string, bad func(key, format string, a ...any)) []gateway.Route {
	var zone *time.Location
	switch t.TimeZone {
	case "":
	case "Local", "local":
		zone = time.Local
	default:
		z, err := time.LoadLocation(t.TimeZone)
		if err != nil {
			bad(key+".time_zone", "%q is not an IANA time zone such as Europe/Berlin or UTC", t.TimeZone)
			return nil
		}
		zone = z
	}
	checks := &payload.Checks{Range: map[string]payload.Range{}}
	for _, metric := range slices.Sorted(maps.Keys(t.Validate)) {
		v := t.Validate[metric]
		if encoding.CheckMetric(metric) != "" {
			bad(key+".validate."+metric, "not a metric name")
		}
		if v.Min != nil && v.Max != nil && *v.Min > *v.Max {
			bad(key+".validate."+metric, "min %g is above max %g", *v.Min, *v.Max)
		}
		if v.Min != nil || v.Max != nil {
			checks.Range[metric] = payload.Range{Min: v.Min, Max: v.Max}
		}
		if v.Required {
			checks.Required = append(checks.Required, metric)
		}
	}
	if len(t.Validate) == 0 {
		checks = nil
	}
	for _, metric := range slices.Sorted(maps.Keys(t.Units)) {
		unit := t.Units[metric]
		if encoding.CheckMetric(metric) != "" {
			bad(key+".units", "%q is not a metric name", metric)
		}
		if !encoding.ValidUnit(unit) {
			bad(key+".units."+metric, "%q is not a unit: 1 to %d bytes of printable UTF-8", unit, encoding.MaxUnitLen)
		}
	}
	metrics := t.metricsFilter(key, bad)
	texts := t.textsOption(key, bad)
	finish := func(routes []gateway.Route) []gateway.Route {
		for i := range routes {
			routes[i].Checks, routes[i].Units, routes[i].Texts = checks, t.Units, texts
			if metrics != nil {
				routes[i].Metrics = metrics
			}
			if zone != nil {
				routes[i].Zone = zone
			}
		}
		return routes
	}
	if t.Preset != "" {
		switch {
		case t.Pattern != "":
			bad(key+".pattern", "a preset has its own topics: set base_topic to move them, or drop preset to give a pattern")
		case t.Format != "":
			bad(key+".format", "a preset reads its own format")
		case t.hasMapping():
			bad(key+".preset", "a preset reads its own fields: mapping options (device_field, time_field, ...) need a pattern instead")
		}
		routes, err := gateway.PresetRoutes(t.Preset, t.BaseTopic, zone)
		if err != nil {
			bad(key+".preset", "%v", err)
			return nil
		}
		presetOptions(t, key, routes, bad)
		return finish(routes)
	}
	if t.BaseTopic != "" {
		bad(key+".base_topic", "base_topic moves a preset's topics: set preset too, or put the topic in pattern")
	}
	if t.DeviceTag != "" {
		bad(key+".device_tag", "names the device's tag of preset telegraf: set preset: telegraf too")
	}
	p, err := gateway.ParsePattern(t.Pattern)
	if err != nil {
		bad(key+".pattern", "%v", err)
		return nil
	}
	format := t.Format
	if format == "" {
		format = "auto"
	}
	f, err := payload.ParseFormat(format)
	if err != nil {
		bad(key+".format", "%v", err)
		return nil
	}
	r := gateway.Route{Pattern: p, Route: payload.Route{Format: f}}
	if t.hasMapping() {
		if f != payload.FormatAuto && f != payload.FormatJSON {
			bad(key+".format", "mapping options read JSON documents: want json or auto (got %s)", t.Format)
		}
		tf, err := payload.ParseTimeFormat(t.TimeFormat)
		if err != nil {
			bad(key+".time_format", "%v", err)
		}
		r.Mapping = &payload.Mapping{
			DeviceField: t.DeviceField, TimeField: t.TimeField, TimeFormat: tf,
			ValueField: t.ValueField, MetricField: t.MetricField, UnitField: t.UnitField,
			StripPrefix: t.StripPrefix,
		}
		if err := r.Mapping.Check(); err != nil {
			bad(key, "%v", err)
		}
	}
	return finish([]gateway.Route{r})
}

// checkMaxStates checks store.max_states_per_series. A text series holds
// its dictionary in memory, each text up to 64 bytes (encoding.MaxText):
// 64 texts are 4 KiB at most a series, and the bound keeps a sensor that
// sends a new text each time (a counter sent as text, a timestamp) from
// taking memory without end.
func checkMaxStates(s StoreConfig, bad func(key, format string, args ...any)) {
	if s.MaxStatesPerSeries < 1 || s.MaxStatesPerSeries > buffer.MaxMaxStates {
		bad("store.max_states_per_series", "must be from 1 to %d (got %d)", buffer.MaxMaxStates, s.MaxStatesPerSeries)
	}
}
