package payload

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// Route says how the messages of one route are read: a payload format, or
// a preset's reader or a mapping; the units of their metrics; the zone of
// their local times; and the checks their readings must pass. Which topics
// are the route's is the caller's to say (gateway.Route pairs a Route with
// a topic pattern, whose {device} and {metric} it passes to DecodeRoute).
type Route struct {
	Format Format
	// Skip, if not "", says the route's messages are not readings but
	// traffic of this kind (one of the Skip constants): they are
	// acknowledged, counted by kind and not decoded.
	Skip string
	// Preset is the name of the preset that made the route, if any.
	Preset string
	// Mapping, if not nil, reads the route's JSON documents (mapping.go).
	Mapping *Mapping
	// Zone is the time zone of times without an offset; nil means UTC.
	Zone *time.Location
	// Units are the units of metrics by name; they win over the unit a
	// payload or preset gives.
	Units map[string]string
	// Checks are the limits readings must keep (see Checks).
	Checks *Checks
	// Metrics, if not nil, drops the readings it does not select (counted
	// as ignored fields) before the checks.
	Metrics *Metrics
	// Texts are the metrics (path.Match patterns, as Metrics' are) whose
	// values are texts: a state word of theirs is a text reading, the
	// word as the device wrote it ("off", "ON"), not the number 0 or 1.
	// A mode whose states include off or on (a thermostat's system_mode:
	// off, heat, cool) is such a metric. A preset's routes know those of
	// their family besides (see textsOf).
	Texts []string
	// DeviceTag is the line protocol tag that names the device on a route
	// of the telegraf preset ("" for host).
	DeviceTag string

	// PayloadDevice: the payload may name another device than the topic's
	// {device} (a BLE MAC in "id", Telegraf's host tag), so the topic is no
	// device's own: the default ACL opens it to no user. Presets set it.
	PayloadDevice bool

	// read, if not nil, reads the messages instead of Format: a preset's
	// reader.
	read readFunc
	// texts, if not nil, reports the series of a preset's family whose
	// values are texts, as Texts does.
	texts func(device, metric string) bool
	// lineTags: line protocol's host tag is the device, and its other tags
	// are a part of each metric's name (telegraf).
	lineTags bool
}

// readFunc reads one message of a route, like Decode.
type readFunc func(d *Decoder, dst []buffer.Reading, payload []byte, device, metric string, recv time.Time) ([]buffer.Reading, int, error)

// Kinds of traffic that are not readings (Route.Skip, SkipError.Kind).
const (
	SkipAvailability = "availability" // online/offline, last will
	SkipCommand      = "command"      // commands to a device, and their /set topics
	SkipBridge       = "bridge"       // a bridge's own state and log
	SkipDiscovery    = "discovery"    // Home Assistant and Tasmota discovery
	SkipMeta         = "meta"         // device info, joins, responses, events
)

// SkipError reports that a message is not a reading but traffic of a kind
// that is counted and acknowledged, such as a LoRaWAN join.
type SkipError struct {
	Kind   string // one of the Skip constants
	Detail string
}

func (e *SkipError) Error() string { return "skipped " + e.Kind + ": " + e.Detail }

// SkipKind returns the kind of the *SkipError in err's chain, or "".
func SkipKind(err error) string {
	if err == nil {
		return "" // errors.As would put se on the heap, once for every message
	}
	var se *SkipError
	if errors.As(err, &se) {
		return se.Kind
	}
	return ""
}

// DecodeRoute decodes one message of route r, like Decode, and then gives
// each reading the unit r.Units names for its metric, or if there is none
// and the reading brought none, the one a message before named (see
// Decoder.Units); and checks the readings against r.Checks.
// A message of a skipped route, or one a preset finds is not a reading,
// yields a *SkipError.
func (d *Decoder) DecodeRoute(dst []buffer.Reading, r *Route, payload []byte, device, metric string, recv time.Time) (out []buffer.Reading, ignored int, err error) {
	if r.Skip != "" {
		return dst, 0, &SkipError{Kind: r.Skip, Detail: "topic of the route"}
	}
	d.zone, d.lineTags, d.deviceTag = r.Zone, r.lineTags, r.DeviceTag
	defer func() { d.zone, d.lineTags, d.deviceTag = nil, false, "" }()
	switch {
	case r.read != nil || r.Mapping != nil:
		if err := d.begin(payload, device); err != nil {
			return dst, 0, err
		}
		if r.read != nil {
			out, ignored, err = r.read(d, dst, payload, device, metric, recv)
		} else {
			out, ignored, err = d.decodeMapped(dst, r.Mapping, payload, device, metric, recv)
		}
	default:
		out, ignored, err = d.Decode(dst, r.Format, payload, device, metric, recv)
	}
	if err != nil {
		d.restamped, d.relN, d.dropped = 0, 0, d.dropped[:0]
		return dst, 0, err
	}
	kept, dropped := r.Metrics.drop(out[len(dst):])
	out, ignored = out[:len(dst)+len(kept)], ignored+dropped
	for i := len(dst); i < len(out); i++ {
		if out[i].Word != "" && r.isText(out[i].Device, out[i].Metric) {
			out[i].Text, out[i].Value, out[i].Word = out[i].Word, 0, ""
		}
		if u, ok := r.Units[out[i].Metric]; ok {
			out[i].Unit = u
		} else if out[i].Unit == "" && d.Units != nil {
			out[i].Unit = d.Units.Unit(out[i].Device, out[i].Metric)
		}
	}
	if err := r.Checks.check(out[len(dst):]); err != nil {
		d.restamped, d.relN, d.dropped = 0, 0, d.dropped[:0]
		return dst, 0, err
	}
	return out, ignored, nil
}

// isText reports whether the values of device's metric are texts on
// route r (Texts, or its preset's own).
func (r *Route) isText(device, metric string) bool {
	for _, p := range r.Texts {
		if matchName(p, metric) {
			return true
		}
	}
	return r.texts != nil && r.texts(device, metric)
}

// CheckTexts reports the first of patterns, the Texts of a route, that is
// empty or not a path.Match pattern.
func CheckTexts(patterns []string) error {
	for _, p := range patterns {
		if p == "" {
			return errors.New("an empty metric pattern")
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("metric pattern %q: %v", p, err)
		}
	}
	return nil
}

// Units holds units that messages give for other messages' readings:
// Home Assistant's unit_of_measurement attribute, ESPHome's discovery
// config. A Decoder looks up the unit of a reading that came without one
// and notes those it learns; its caller keeps them, shared by its
// Decoders (a Units is used by many goroutines at once).
type Units interface {
	// Unit returns the unit learned for the series, or "".
	Unit(device, metric string) string
	// Learn records unit for the series; it may refuse to (an invalid
	// name, or a full book).
	Learn(device, metric, unit string)
}

// Checks are limits that readings must keep, by metric: like a schema
// validator, they reject a message whose readings break them, with the
// reason out_of_range or missing_metric.
type Checks struct {
	// Range bounds the values of metrics by name.
	Range map[string]Range
	// Required are metrics every message must bring a reading of.
	Required []string
}

// Range bounds a value; a nil bound is no bound.
type Range struct{ Min, Max *float64 }

// Reasons for which Checks reject a message.
const (
	ReasonOutOfRange    = "out_of_range"   // a value outside its metric's min and max
	ReasonMissingMetric = "missing_metric" // a required metric without a reading
)

// check returns a *RejectError for the first reading out of range, or the
// first required metric without a reading; nil Checks pass everything.
func (c *Checks) check(rs []buffer.Reading) error {
	if c == nil {
		return nil
	}
	for _, r := range rs {
		b, ok := c.Range[r.Metric]
		if !ok {
			continue
		}
		if b.Min != nil && r.Value < *b.Min || b.Max != nil && r.Value > *b.Max {
			return rejectf(ReasonOutOfRange, "device %s metric %s = %g, want %s", quote(r.Device), quote(r.Metric), r.Value, b)
		}
	}
	if len(rs) == 0 {
		return nil // a message without a value (an action, "unavailable") settles as it is
	}
	for _, m := range c.Required {
		found := false
		for _, r := range rs {
			if r.Metric == m {
				found = true
				break
			}
		}
		if !found {
			return rejectf(ReasonMissingMetric, "no reading of %s", quote(m))
		}
	}
	return nil
}

func (b Range) String() string {
	switch {
	case b.Min != nil && b.Max != nil:
		return fmt.Sprintf("%g to %g", *b.Min, *b.Max)
	case b.Min != nil:
		return fmt.Sprintf("at least %g", *b.Min)
	case b.Max != nil:
		return fmt.Sprintf("at most %g", *b.Max)
	}
	return "any value"
}
