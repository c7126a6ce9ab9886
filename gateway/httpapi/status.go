package httpapi

import (
	"net/http"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway"
	"github.com/cairn-gateway/cairn/uplink"
)

// Status is the document served at /v1/status.
type Status struct {
	Version       string              `json:"version"`
	Started       time.Time           `json:"started"`
	UptimeSeconds int64               `json:"uptime_seconds"`
	MQTT          MQTTStatus          `json:"mqtt"`
	Ingest        gateway.IngestStats `json:"ingest"`
	Store         StoreStatus         `json:"store"`
	// Uplinks are the upstreams, in the configuration's order; Uplink is
	// the first of them, absent when there is none.
	Uplinks []uplink.Status `json:"uplinks"`
	Uplink  *uplink.Status  `json:"uplink,omitempty"`
	// Retention says what retention removed, and why it may be paused.
	Retention *buffer.RetentionStatus `json:"retention,omitempty"`
	// Clock says whether the clock is synchronised and trusted.
	Clock *buffer.ClockStatus `json:"clock,omitempty"`
}

// StoreStatus is the store part of Status.
type StoreStatus struct {
	Readings uint64 `json:"readings"`
	Series   int    `json:"series"`
	// MaxSeries and MaxSeriesPerDevice are the limits on series (0:
	// none); a reading over one is refused (IngestStats.Refused).
	MaxSeries          int   `json:"max_series"`
	MaxSeriesPerDevice int   `json:"max_series_per_device"`
	DiskBytes          int64 `json:"disk_bytes"`
	// DiskFreeBytes is what the data directory's file system has free;
	// ingest pauses below DiskReserveBytes. ReserveFileBytes is held by
	// the reserve file, given up when the disk is full.
	DiskFreeBytes    int64 `json:"disk_free_bytes"`
	DiskReserveBytes int64 `json:"disk_reserve_bytes"`
	ReserveFileBytes int64 `json:"reserve_file_bytes"`
	// ForeignBytes is held by files in the data directory that are not
	// cairn's (ForeignFiles names a few): not counted by the disk cap,
	// never deleted.
	ForeignBytes int64    `json:"foreign_bytes"`
	ForeignFiles []string `json:"foreign_files"`
	Commits      uint64   `json:"commits"`
	CommitErrors uint64   `json:"commit_errors"`
	Checkpoints  uint64   `json:"checkpoints"`
	Sealed       uint64   `json:"sealed"`
	SealErrors   uint64   `json:"seal_errors"`
	StatsPruned  uint64   `json:"stats_pruned"`
	Pruned       uint64   `json:"readings_pruned"`
	CommitMillis float64  `json:"commit_ms_avg"`
	// Gathered are the commits that waited for other sensors to join
	// them (store.commit_wait).
	Gathered uint64 `json:"gathered_commits"`
}

func (a *API) status(w http.ResponseWriter, _ *http.Request) {
	st, err := a.opts.Store.Stats()
	if err != nil {
		a.fail(w, http.StatusInternalServerError, err)
		return
	}
	ws := a.opts.Writer.Stats()
	s := Status{
		Version:       a.opts.Version,
		Started:       a.opts.Started.UTC(),
		UptimeSeconds: int64(time.Since(a.opts.Started).Seconds()),
		MQTT:          a.opts.MQTT(),
		Ingest:        a.opts.Ingest.Stats(),
		Store: StoreStatus{
			Readings:         st.Readings,
			Series:           st.Series,
			DiskBytes:        st.DiskBytes,
			ReserveFileBytes: st.ReserveFileBytes,
			ForeignBytes:     st.ForeignBytes,
			ForeignFiles:     st.ForeignFiles,
			Commits:          ws.Commits,
			CommitErrors:     ws.Failures,
			Gathered:         ws.Gathered,
			Checkpoints:      ws.Checkpoints,
			Sealed:           ws.Sealed,
			SealErrors:       ws.SealErrors,
			StatsPruned:      ws.Pruned,
			Pruned:           ws.PrunedReadings,
		},
	}
	s.Store.MaxSeries, s.Store.MaxSeriesPerDevice = a.opts.Writer.SeriesLimits()
	s.Ingest.PausedReason = a.opts.Writer.PausedReason()
	s.Ingest.Paused = s.Ingest.PausedReason != ""
	if a.opts.Headroom != nil {
		hs := a.opts.Headroom.Status()
		s.Store.DiskFreeBytes, s.Store.DiskReserveBytes = hs.FreeBytes, hs.ReserveBytes
	}
	if n := ws.Commits + ws.Failures; n > 0 {
		s.Store.CommitMillis = float64(ws.SyncNanos) / float64(n) / 1e6
	}
	for _, u := range a.opts.Uplinks {
		s.Uplinks = append(s.Uplinks, u.Status())
	}
	if len(s.Uplinks) > 0 {
		s.Uplink = &s.Uplinks[0]
	}
	if a.opts.Retention != nil {
		rs, err := a.opts.Retention.Status()
		if err != nil {
			a.fail(w, http.StatusInternalServerError, err)
			return
		}
		s.Retention = &rs
	}
	if a.opts.Clock != nil {
		cs := a.opts.Clock.Status()
		s.Clock = &cs
	}
	writeJSON(w, http.StatusOK, withEmptyLists(s))
}

// withEmptyLists returns s with its nil maps and slices made empty, so
// that every documented field is in the document, as {} or [] when there
// is nothing to list, never left out or null.
func withEmptyLists(s Status) Status {
	if s.MQTT.RefusedByReason == nil {
		s.MQTT.RefusedByReason = map[string]uint64{}
	}
	if s.Store.ForeignFiles == nil {
		s.Store.ForeignFiles = []string{}
	}
	if s.Uplinks == nil {
		s.Uplinks = []uplink.Status{}
	}
	return s
}
