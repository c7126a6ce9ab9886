package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	oklog "github.com/oklog/run"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/gateway/httpapi"
	"github.com/cairn-gateway/cairn/uplink"
)

// noSyncEnv, set to 1, turns off the fsync of every group commit. It exists
// for the power-cut test's control run only: acknowledged readings are then
// not durable. It is not a configuration key on purpose.
const noSyncEnv = "CAIRN_UNSAFE_NO_SYNC"

// runDaemon runs the gateway until a signal arrives on sigs or ctx ends. A
// signal on reload.hups reloads the configuration (reload.go).
//
//	sensors ──MQTT──▶ broker (embedded, mochi)  ─┐
//	                  or subscriber (external) ──┤ Ingester: match topic,
//	                                             │ decode, validate
//	                                             ▼
//	                         Writer: group commit, sync ──▶ Store (Badger)
//	                                             │             ▲
//	          PUBACK / Ack once synced ◀─────────┘             │
//	HTTP API (status, queries, metrics) ───────────────────────┤
//	upstreams ◀── Uplink, one per upstream, on its own cursor ─┘
func runDaemon(ctx context.Context, cfg *Config, stderr io.Writer, sigs <-chan os.Signal, reload reloadSource) error {
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return &configError{err}
	}
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + w)
	}
	stopProfile, err := startCPUProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	stopHeapProfile, err := startHeapProfile(log)
	if err != nil {
		return err
	}
	defer stopHeapProfile()
	memoryLimit, envLimit := "unset", os.Getenv("GOMEMLIMIT")
	if envLimit != "" {
		memoryLimit = "GOMEMLIMIT=" + envLimit
	}
	if cfg.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMiB) << 20)
		memoryLimit = cfg.MemoryLimitMiB.String()
	}
	// GOMAXPROCS is the runtime's: the CPUs cairn may run on (its affinity;
	// under a cgroup's CPU quota at least two), or the GOMAXPROCS variable. cairn once ran two Ps
	// on a single core so that MQTT reads went on while a commit synced;
	// with reads gathered (mqtt.read_coalesce) and commits that wait in
	// slices, one P drains a backlog faster and takes less CPU at a steady
	// rate, with syncs of 40–50 ms too (docs/performance.md).
	started := time.Now()

	// How large the store may grow sets the size of its tables.
	maxBytes := int64(cfg.Retention.MaxDiskBytes)
	switch cfg.Retention.MaxDiskBytes {
	case AutoBytes:
		maxBytes = 0 // known once the store is open: at most the default ceiling
	case 0:
		maxBytes = -1 // no cap: the file system's size
	}
	store, err := openStore(ctx, buffer.Options{
		Dir:          cfg.DataDir,
		MemTableSize: int64(cfg.Store.MemTableMiB) << 20,
		CacheSize:    int64(cfg.Store.CacheMiB) << 20,
		MaxBytes:     maxBytes,
		NoSync:       os.Getenv(noSyncEnv) == "1",
		Logger:       log.With("component", "store"),
	}, sigs, log)
	if err != nil || store == nil {
		return storeError(err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	// memory_limit_mib auto, unless GOMEMLIMIT says otherwise.
	var limiter *memoryLimiter
	if cfg.MemoryLimitMiB == AutoMiB && envLimit == "" {
		limiter = &memoryLimiter{cfg: cfg.Store, store: store}
		memoryLimit = fmt.Sprintf("auto (%d)", limiter.set()>>20)
	}
	if os.Getenv(noSyncEnv) == "1" {
		log.Warn("group commits are not synced: acknowledged readings can be lost", "env", noSyncEnv)
	}
	maxDisk := int64(cfg.Retention.MaxDiskBytes)
	if cfg.Retention.MaxDiskBytes == AutoBytes {
		if maxDisk, err = store.DefaultMaxDiskBytes(); err != nil {
			return &configError{fmt.Errorf("retention.max_disk_bytes auto: %w", err)}
		}
	}
	clockOpts := clockSource()
	clockOpts.Floor = buildTime()
	clockOpts.Always = cfg.Clock.Trust == "always"
	clockOpts.Logger = log.With("component", "clock")
	clock, err := buffer.NewClock(store, clockOpts)
	if err != nil {
		return err
	}
	writer := buffer.NewWriter(store, buffer.WriterOptions{
		MaxReadings:        cfg.Store.CommitMaxReadings,
		Wait:               cfg.Store.CommitWait,
		BucketSamples:      cfg.Store.BucketSamples,
		SealIdle:           cfg.Store.SealIdle,
		Retention:          retentionPolicy(cfg.Retention, maxDisk),
		Clock:              clock,
		MaxSeries:          cfg.Store.MaxSeries,
		MaxSeriesPerDevice: cfg.Store.MaxSeriesPerDevice,
		MaxStates:          cfg.Store.MaxStatesPerSeries,
	})
	headroom := buffer.NewHeadroom(store, writer, buffer.HeadroomOptions{
		Reserve: int64(max(cfg.Store.DiskReserve, 0)), // auto: 0, the default
		Logger:  log.With("component", "store"),
	})
	retention := buffer.NewRetention(store, writer, buffer.RetentionOptions{
		Reserve: headroom.Reserve(), // the cap leaves it free
		Now:     clock.Now,
		Logger:  log.With("component", "retention"),
	})
	ingester := gateway.NewIngester(writer, gateway.IngesterOptions{
		Routes:        cfg.routes,
		MaxPayload:    int(cfg.MQTT.MaxPayload),
		MaxFutureSkew: time.Duration(cfg.MQTT.MaxFutureSkew),
		Clock:         clock,
		Logger:        log.With("component", "ingest"),
	})

	var g oklog.Group

	// Signals: the first SIGINT or SIGTERM stops the gateway cleanly; a
	// second one, while it stops, exits at once.
	{
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			select {
			case sig := <-sigs:
				log.Info("stopping; send the signal again to exit at once", "signal", sig.String())
				go func() {
					if sig, ok := <-sigs; ok {
						log.Error("exiting at once", "signal", sig.String())
						os.Exit(1)
					}
				}()
				return nil
			case <-ctx.Done():
				return nil
			}
		}, func(error) { cancel() })
	}

	// MQTT: the embedded broker or the subscriber to an external one.
	// mqttStopped is closed once it has stopped taking messages in.
	var mqttStatus func() httpapi.MQTTStatus
	var mqttAddr string
	var sub *gateway.Subscriber // nil with the embedded broker
	var brk *gateway.Broker     // nil with an external broker
	mqttStopped := make(chan struct{})
	if e := cfg.MQTT.Embedded; e != nil {
		tlsConfig := cfg.secrets.brokerTLS
		if anonymousBeyondLoopback(e) {
			log.Warn("mqtt.embedded.allow_anonymous is true: anyone who can reach the broker may publish and subscribe to anything")
		}
		broker, err := gateway.NewBroker(gateway.BrokerOptions{
			Listen:    e.Listen,
			TLSListen: e.TLSListen,
			TLS:       tlsConfig,
			Ingester:  ingester,
			Logger:    brokerLogger(cfg.Log, stderr),
			Security:  cfg.brokerSecurity(),
			Refusals:  gateway.NewRefusals(log.With("component", "broker")),

			ReadCoalesce: time.Duration(cfg.MQTT.ReadCoalesce),
			Version:      version,
		})
		if err != nil {
			return bindError(err) // a bad address fails validation; this is the system's answer
		}
		brk = broker
		mqttAddr = broker.Addr()
		if mqttAddr == "" { // TLS only
			mqttAddr = broker.TLSAddr()
		}
		if a := broker.TLSAddr(); a != "" {
			log.Info("mqtt tls listener", "mqtt_tls", a, "client_certificates", tlsConfig.ClientCAs != nil)
		}
		mqttStatus = func() httpapi.MQTTStatus {
			refused := broker.Refusals().Counts()
			var total uint64
			for _, n := range refused {
				total += n
			}
			return httpapi.MQTTStatus{Mode: "embedded", Address: mqttAddr, Connected: true, Clients: broker.Clients(),
				Refused: total, RefusedByReason: refused}
		}
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			defer close(mqttStopped)
			err := broker.Run(ctx)
			if errors.Is(err, gateway.ErrBrokerCloseTimeout) {
				log.Warn("stopping without waiting for the mqtt broker", "err", err)
				return nil
			}
			return err
		}, func(error) { cancel() })
	} else {
		filters := make([]string, len(cfg.routes))
		for i, r := range cfg.routes {
			filters[i] = r.Pattern.Filter()
		}
		sub = gateway.NewSubscriber(gateway.SubscriberOptions{
			URL:      cfg.MQTT.URL,
			ClientID: cfg.MQTT.ClientID,
			Filters:  filters,
			Ingester: ingester,
			Logger:   log.With("component", "subscriber"),
			Username: cfg.MQTT.Username,
			Password: cfg.secrets.mqttPassword,
			TLS:      cfg.secrets.mqttTLS,

			ReadCoalesce: time.Duration(cfg.MQTT.ReadCoalesce),
		})
		mqttAddr = cfg.MQTT.URL
		mqttStatus = func() httpapi.MQTTStatus { return externalStatus(cfg.MQTT.URL, sub.Connection()) }
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error {
			defer close(mqttStopped)
			return sub.Run(ctx)
		}, func(error) { cancel() })
	}

	// Writer: the group commit. On interrupt it waits for MQTT to stop
	// taking messages in (a few seconds at most), then commits what is
	// queued and returns.
	{
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return writer.Run(ctx) }, func(error) {
			select {
			case <-mqttStopped:
			case <-time.After(5 * time.Second):
				log.Warn("mqtt did not stop in 5s; committing what is queued anyway")
			}
			cancel()
		})
	}

	// Retention: prunes by age every hour and keeps the disk cap, deleting
	// through the writer between its group commits.
	{
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return retention.Run(ctx) }, func(error) { cancel() })
	}

	// Clock: judged again every second.
	{
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return clock.Run(ctx) }, func(error) { cancel() })
	}

	// Headroom: pauses ingest while the file system is nearly full, and
	// resumes it once there is room again.
	{
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return headroom.Run(ctx) }, func(error) { cancel() })
	}

	// Memory: the auto limit follows the number of series.
	if limiter != nil {
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return limiter.run(ctx) }, func(error) { cancel() })
	}

	// Uplinks: each sends the log upstream from its own cursor until
	// interrupted, at its own pace: one that fails waits alone.
	ups, err := newUplinks(store, clock, cfg, log)
	if err != nil {
		return err
	}
	for _, up := range ups {
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return up.Run(ctx) }, func(error) { cancel() })
	}

	// HTTP: status, queries and metrics.
	reg := httpapi.NewRegistry()
	reg.Register(httpapi.RuntimeCollector())
	apiOpts := httpapi.Options{
		Store:           store,
		Writer:          writer,
		Ingest:          ingester,
		MQTT:            mqttStatus,
		Retention:       retention,
		Headroom:        headroom,
		Clock:           clock,
		MetricsReadings: cfg.HTTP.MetricsReadings,
		Version:         version,
		Started:         started,
		Registry:        reg,
		Logger:          log.With("component", "http"),
	}
	for _, up := range ups {
		apiOpts.Uplinks = append(apiOpts.Uplinks, up)
	}
	api, err := httpapi.New(apiOpts)
	if err != nil {
		return err
	}
	if anonymousHTTPBeyondLoopback(cfg.HTTP) {
		log.Warn("http.allow_anonymous is true: anyone who can reach http.listen may read the API and the dashboard", "listen", cfg.HTTP.Listen, "allowed_hosts", cfg.HTTP.AllowedHosts)
	}
	handler, err := httpapi.NewGuard(api, httpapi.GuardOptions{Token: cfg.secrets.httpToken, AllowedHosts: cfg.HTTP.AllowedHosts, QueryRate: cfg.HTTP.QueryRate, Registry: reg, Logger: log.With("component", "http")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return bindError(fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err))
	}
	{
		srv := &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		}
		g.Add(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		}, func(error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				log.Warn("http server shutdown", "err", err)
			}
		})
	}

	// Reload: SIGHUP applies a changed topic list, retention and uplink.
	{
		r := &reloader{src: reload, cfg: cfg, ingester: ingester, sub: sub, broker: brk, writer: writer, store: store, uplinks: ups, log: log.With("component", "reload")}
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return r.run(ctx) }, func(error) { cancel() })
	}

	// systemd: READY=1 now that the store is open and the listeners are
	// bound (an external broker that is down does not hold it: the log
	// and the status say why it cannot be reached), then watchdog pings
	// while ingest is healthy (watchdog.go).
	{
		interval, err := daemon.SdWatchdogEnabled(false)
		if err != nil {
			log.Warn("systemd watchdog", "err", err)
		}
		n := &notifier{writer: writer, interval: interval, log: log.With("component", "systemd")}
		ctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return n.run(ctx) }, func(error) { cancel() })
	}

	// What the start left behind (the configuration parsed, the store's
	// series index loaded and its journal replayed: many MiB for a large
	// store) goes back to the system now, not when the runtime's
	// scavenger gets to it: one collection.
	debug.FreeOSMemory()
	log.Info("cairn started", "version", version, "data_dir", cfg.DataDir, "readings", store.ReadingCount(), "max_disk_bytes", maxDisk, "memory_limit_mib", memoryLimit,
		"mqtt", mqttAddr, "http", gateway.BoundAddress(cfg.HTTP.Listen, ln.Addr()))
	err = g.Run()
	if _, nerr := daemon.SdNotify(false, daemon.SdNotifyStopping); nerr != nil {
		log.Warn("systemd notify", "err", nerr)
	}
	ws := writer.Stats()
	log.Info("cairn stopped", "commits", ws.Commits, "stored", ws.Stored)
	return err
}

// openStore opens the store. On a file system too full for it to open
// (and without the reserve file that Open gives up then), it waits for
// free space, trying again every few seconds and telling systemd to wait
// too, rather than exit and be restarted in a loop; it returns a nil
// store and nil if a signal on sigs or the end of ctx stops it meanwhile.
func openStore(ctx context.Context, opts buffer.Options, sigs <-chan os.Signal, log *slog.Logger) (*buffer.Store, error) {
	const retry = 5 * time.Second
	for logged := false; ; logged = true {
		store, err := buffer.Open(opts)
		if !errors.Is(err, buffer.ErrNoSpace) {
			return store, err
		}
		if !logged {
			log.Error("the store cannot open: its file system is full; waiting for free space", "dir", opts.Dir, "err", err)
		}
		status := fmt.Sprintf("STATUS=waiting for free space on %s\nEXTEND_TIMEOUT_USEC=%d", opts.Dir, (3 * retry).Microseconds())
		if _, nerr := daemon.SdNotify(false, status); nerr != nil {
			log.Warn("systemd notify", "err", nerr)
		}
		select {
		case <-time.After(retry):
		case sig := <-sigs:
			log.Info("stopping while waiting for free space", "signal", sig.String())
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// buildTime is the build date stamped into the binary (main.date), below
// which the clock is not trusted; zero when the binary is not stamped.
func buildTime() time.Time {
	t, err := time.Parse(time.RFC3339, date)
	if err != nil {
		return time.Time{}
	}
	return t
}

// newLogger builds the process logger. Under systemd (JOURNAL_STREAM set)
// lines carry no timestamp: the journal adds its own.
func newLogger(c LogConfig, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if os.Getenv("JOURNAL_STREAM") != "" {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// brokerLogger is the embedded broker's logger: it says a line for every
// hook and listener at info level, and one for every bad packet at warn,
// so it logs errors only unless debug. What the broker refuses is logged
// by the guard instead, once per client and minute.
func brokerLogger(c LogConfig, w io.Writer) *slog.Logger {
	if c.Level != "debug" {
		c.Level = "error"
	}
	log, err := newLogger(c, w)
	if err != nil { // c was validated
		return slog.New(slog.DiscardHandler)
	}
	return log.With("component", "broker")
}

// retentionPolicy returns the Writer's retention policy for the
// retention: section, with maxDisk the disk cap it comes to (auto
// resolved).
func retentionPolicy(rt RetentionConfig, maxDisk int64) buffer.RetentionPolicy {
	return buffer.RetentionPolicy{
		RawMaxAge: time.Duration(rt.RawMaxAge),
		StatsMaxAge: map[aggregate.Level]time.Duration{
			aggregate.Minute: time.Duration(rt.MinuteStatsMaxAge),
			aggregate.Hour:   time.Duration(rt.HourStatsMaxAge),
			aggregate.Day:    time.Duration(rt.DayStatsMaxAge),
		},
		RawMaxReadingsPerSeries: rt.RawMaxReadingsPerSeries,
		RawWindowFromLatest:     time.Duration(rt.RawWindowFromLatest),
		MaxDiskBytes:            maxDisk,
		KeepRecent:              time.Duration(rt.KeepRecent),
	}
}

// newUplinks creates the uplink of each upstream of cfg, in order, on its
// cursor in the store's log, and warns of readings that wait in the log
// for an upstream no longer configured.
func newUplinks(store *buffer.Store, clock *buffer.Clock, cfg *Config, log *slog.Logger) ([]*uplink.Uplink, error) {
	ups := make([]*uplink.Uplink, len(cfg.uplinks))
	for i, opts := range cfg.uplinks {
		o := *opts
		o.ParkDir = parkDir(cfg.DataDir, o.Name)
		o.Logger = log.With("component", "uplink", "upstream", o.Name)
		o.Stats, o.Now, o.Trusted = store, clock.Now, clock.Trusted // data: stats reads records and closes periods, and max_backlog judges ages, by the gateway's clock
		cur, err := store.Cursor(o.Name)
		if err != nil {
			return nil, err
		}
		if ups[i], err = uplink.New(cur, o); err != nil {
			return nil, err
		}
	}
	names := make([]string, len(cfg.uplinks))
	for i, u := range cfg.uplinks {
		names[i] = u.Name
	}
	store.SetUpstreams(names)
	for _, name := range store.CursorNames() {
		if o, _ := store.CursorState(name); o.Pending() > 0 && !slices.Contains(names, name) {
			log.Warn("readings are waiting in the log for an upstream that is not configured; they are kept until the disk cap needs their room, and go before any other data",
				"upstream", name, "pending", o.Pending())
		}
	}
	return ups, nil
}

// parkDir is where the upstream name parks the batches it refuses:
// <data_dir>/parked for default, where the single upstream before lists
// parked them, and <data_dir>/parked/<name> for any other.
func parkDir(dataDir, name string) string {
	if name == defaultUpstream {
		return filepath.Join(dataDir, "parked")
	}
	return filepath.Join(dataDir, "parked", name)
}
