package buffer

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// The series index and its limits. Every series costs memory for as long
// as the store holds it (BenchmarkSeriesMemory, docs/storage.md), and
// metric names are free for a sensor to make up: without limits a flood of
// new names takes every byte of a small board. WriterOptions.MaxSeries and
// MaxSeriesPerDevice bound the count; a reading that would make a series
// over either is refused (Result.Refused), and the rest of its batch is
// stored. Series stored already are never refused, whatever the limits
// are now: a limit lowered below what a store holds only stops new ones.

// deviceSeries is what the store keeps about one device: its name, which
// every series of the device shares (one copy of it in memory, not one
// per series), and how many series it has.
type deviceSeries struct {
	name   string
	series int
	// heard is when cairn last heard from the device, in ns since the
	// epoch by its own clock (math.MinInt64: never); heardSaved is the
	// time the store holds for it, which only the Writer's goroutine (or
	// Open) reads and writes (heard.go).
	heard, heardSaved int64
}

// SeriesRefusal describes a reading the Writer refused because it would
// have made a new series over a limit.
type SeriesRefusal struct {
	Device, Metric string
	// PerDevice is true when the device's limit refused it
	// (WriterOptions.MaxSeriesPerDevice), false for the store's
	// (MaxSeries).
	PerDevice bool
	// Series is how many series the device (PerDevice) or the store had.
	Series int
}

func (r *SeriesRefusal) Error() string {
	if r.PerDevice {
		return fmt.Sprintf("device %q has %d series (store.max_series_per_device); metric %q refused", r.Device, r.Series, r.Metric)
	}
	return fmt.Sprintf("the store has %d series (store.max_series); device %q metric %q refused", r.Series, r.Device, r.Metric)
}

// addSeries adds a series to the index under its id (seriesID). The
// caller holds mu for writing, or is Open.
func (s *Store) addSeries(id string, st *seriesState) {
	s.series[id] = st
	d := s.devices[st.device]
	if d == nil {
		d = &deviceSeries{name: st.device, heard: math.MinInt64, heardSaved: math.MinInt64}
		s.devices[st.device] = d
	}
	d.series++
}

// loadSeries returns the state of a series for load, adding it to the
// index if it is new.
func (s *Store) loadSeries(device, metric string, now time.Time) *seriesState {
	id := seriesID(device, metric)
	if st := s.series[id]; st != nil {
		return st
	}
	if d := s.devices[device]; d != nil {
		device = d.name
	}
	st := newSeriesState(device, id[len(device)+1:], now)
	s.addSeries(id, st)
	return st
}

// seriesLimit says which limit refuses a new series.
type seriesLimit int

const (
	noLimit        seriesLimit = iota
	limitPerDevice             // WriterOptions.MaxSeriesPerDevice
	limitTotal                 // WriterOptions.MaxSeries
)

// state returns the state of a series, creating it (for the index, once
// committed) if the series is new. It returns nil if the series is new
// and a limit refuses it, and which limit and how many series it counted.
// The metric name of a new series is a part of its id, and the device
// name is the one its device's other series have, so that a series
// costs one string.
func (w *Writer) state(device, metric string, now time.Time) (*seriesState, seriesLimit, int) {
	w.scratch = append(append(append(w.scratch[:0], device...), 0), metric...)
	if st := w.store.series[string(w.scratch)]; st != nil { // only this goroutine writes the map
		return st, noLimit, 0
	}
	if st := w.created[string(w.scratch)]; st != nil {
		return st, noLimit, 0
	}
	stored, made := w.store.devices[device], w.createdBy[device]
	n := 0
	if stored != nil {
		n = stored.series
		device = stored.name
	}
	if made != nil {
		n += made.series
		device = made.name
	}
	if max := w.opts.MaxSeriesPerDevice; max > 0 && n >= max {
		return nil, limitPerDevice, n
	}
	if max, total := w.opts.MaxSeries, len(w.store.series)+len(w.created); max > 0 && total >= max {
		return nil, limitTotal, total
	}
	id := string(w.scratch)
	st := newSeriesState(device, id[len(device)+1:], now)
	w.created[id] = st
	if made == nil {
		if stored == nil {
			device = strings.Clone(device) // not a part of a topic or payload
		}
		made = &deviceSeries{name: device}
		w.createdBy[device] = made
	}
	made.series++
	return st, noLimit, 0
}

// refuse counts a reading refused by limit, which counted n series, in
// res, keeping the first of the batch as its example.
func (w *Writer) refuse(res *Result, r *Reading, limit seriesLimit, n int) {
	res.Refused++
	if res.Refusal == nil {
		res.Refusal = &SeriesRefusal{Device: r.Device, Metric: r.Metric, PerDevice: limit == limitPerDevice, Series: n}
	}
}

// published notes that a series created in this commit is in the index.
// The caller holds the store's mu.
func (w *Writer) published(id string, st *seriesState) {
	w.store.addSeries(id, st)
	delete(w.created, id)
	if d := w.createdBy[st.device]; d != nil {
		if d.series--; d.series == 0 {
			delete(w.createdBy, st.device)
		}
	}
}

// SeriesLimits returns the limits on series the Writer applies (0: none).
func (w *Writer) SeriesLimits() (total, perDevice int) {
	return w.opts.MaxSeries, w.opts.MaxSeriesPerDevice
}

// HasDevice reports whether the store has a series of device.
func (s *Store) HasDevice(device string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.devices[device] != nil
}

// Device describes a device of the index: its metrics, sorted, the unit
// of each (Units[i] is that of Metrics[i], "" when not known), the
// newest timestamp stored of any of them, and when cairn last heard from
// it, by the gateway's clock (ns since the epoch; math.MinInt64: never;
// see heard.go).
type Device struct {
	Name    string
	Metrics []string
	Units   []string
	Last    int64
	Heard   int64
}

// Devices returns the devices whose names sort after after ("": from the
// first), at most limit of them (limit > 0), sorted by name, and whether
// more follow. It costs a look at every series of the index: the devices
// of a page are gathered in one pass.
func (s *Store) Devices(after string, limit int) ([]Device, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, min(len(s.devices), 1024))
	for name := range s.devices {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	more := len(names) > limit
	if more {
		names = names[:limit]
	}
	out := make([]Device, len(names))
	page := make(map[string]*Device, len(names))
	for i, name := range names {
		n := s.devices[name].series
		out[i] = Device{Name: name, Metrics: make([]string, 0, n), Units: make([]string, 0, n), Last: math.MinInt64, Heard: s.devices[name].heard}
		page[name] = &out[i]
	}
	for _, st := range s.series {
		if d := page[st.device]; d != nil {
			d.Metrics = append(d.Metrics, st.metric)
			d.Units = append(d.Units, st.unitName())
			d.Last = max(d.Last, st.last)
		}
	}
	for i := range out {
		sort.Sort(byMetric(out[i]))
	}
	return out, more
}

// byMetric sorts a Device's metrics and their units by metric.
type byMetric Device

func (d byMetric) Len() int           { return len(d.Metrics) }
func (d byMetric) Less(i, j int) bool { return d.Metrics[i] < d.Metrics[j] }
func (d byMetric) Swap(i, j int) {
	d.Metrics[i], d.Metrics[j] = d.Metrics[j], d.Metrics[i]
	d.Units[i], d.Units[j] = d.Units[j], d.Units[i]
}
