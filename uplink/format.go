package uplink

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// Format is how a batch is written for the upstream.
type Format int

const (
	// Influx is InfluxDB line protocol: one line per device and timestamp,
	// the device and the gateway as tags, metrics as float fields,
	// nanosecond timestamps. InfluxDB 1.x/2.x/3.x, VictoriaMetrics,
	// QuestDB and Telegraf take it; a batch sent twice changes nothing.
	Influx Format = iota
	// JSON is cairn's JSON batch for webhooks:
	//
	//	{"gateway":"pi-kitchen","batch":"pi-kitchen-1200",
	//	 "readings":[{"id":"…","device":"…","metric":"…","ts":"RFC 3339","value":21.5}]}
	//
	// where a reading's id is stable across retries and sorts by time,
	// then device, then the reading's sequence number.
	JSON
)

// ParseFormat parses the uplink.format config value.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "influx":
		return Influx, nil
	case "json":
		return JSON, nil
	}
	return 0, fmt.Errorf("must be influx or json (got %q)", s)
}

func (f Format) String() string {
	if f == JSON {
		return "json"
	}
	return "influx"
}

func (f Format) contentType() string {
	if f == JSON {
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

// fileExt is the extension of a parked batch's body.
func (f Format) fileExt() string {
	if f == JSON {
		return ".json"
	}
	return ".lp"
}

// encoder writes batches in one format. Its buffer is reused.
type encoder struct {
	format      Format
	measurement string // escaped
	gatewayTag  string // ",gateway=…" escaped, or empty
	gateway     string
	buf         []byte
}

func newEncoder(f Format, measurement, gateway string) *encoder {
	e := &encoder{format: f, gateway: gateway, measurement: escape(measurement, ", ")}
	if gateway != "" {
		e.gatewayTag = ",gateway=" + escape(gateway, ",= ")
	}
	return e
}

// encode writes the batch whose id is batch and returns the body. Only
// finite values are written (ingest refuses the others); a reading that
// is not is counted in skipped.
func (e *encoder) encode(batch string, rs []buffer.OutboxReading) (body []byte, skipped int) {
	if e.format == JSON {
		return e.json(batch, rs)
	}
	return e.influx(rs)
}

// influx writes rs as line protocol. Consecutive readings of one device
// and timestamp (the fields of one message) share a line, unless a metric
// repeats.
func (e *encoder) influx(rs []buffer.OutboxReading) ([]byte, int) {
	b := e.buf[:0]
	skipped := 0
	lineStart := -1 // index in rs of the reading that opened the line
	for i := range rs {
		r := &rs[i]
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
			skipped++
			continue
		}
		same := lineStart >= 0 && rs[lineStart].Device == r.Device && rs[lineStart].TS == r.TS
		if same {
			for j := lineStart; j < i; j++ {
				if rs[j].Metric == r.Metric {
					same = false
					break
				}
			}
		}
		if same {
			b = append(b, ',')
		} else {
			if lineStart >= 0 {
				b = append(b, ' ')
				b = strconv.AppendInt(b, rs[lineStart].TS, 10)
				b = append(b, '\n')
			}
			lineStart = i
			b = append(b, e.measurement...)
			b = append(b, ",device="...)
			b = appendEscaped(b, r.Device, ",= ")
			b = append(b, e.gatewayTag...)
			b = append(b, ' ')
		}
		b = appendEscaped(b, r.Metric, ",= ")
		b = append(b, '=')
		b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
	}
	if lineStart >= 0 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, rs[lineStart].TS, 10)
		b = append(b, '\n')
	}
	e.buf = b
	return b, skipped
}

// json writes rs as cairn's JSON batch.
func (e *encoder) json(batch string, rs []buffer.OutboxReading) ([]byte, int) {
	b := append(e.buf[:0], `{"gateway":`...)
	b = strconv.AppendQuote(b, e.gateway)
	b = append(b, `,"batch":`...)
	b = strconv.AppendQuote(b, batch)
	b = append(b, `,"readings":[`...)
	skipped, n := 0, 0
	for i := range rs {
		r := &rs[i]
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
			skipped++
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":"`...)
		b = appendReadingID(b, r)
		b = append(b, `","device":`...)
		b = strconv.AppendQuote(b, r.Device)
		b = append(b, `,"metric":`...)
		b = strconv.AppendQuote(b, r.Metric)
		b = append(b, `,"ts":"`...)
		b = time.Unix(0, r.TS).UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","value":`...)
		b = strconv.AppendFloat(b, r.Value, 'g', -1, 64)
		b = append(b, '}')
	}
	b = append(b, "]}\n"...)
	e.buf = b
	return b, skipped
}

// appendReadingID appends a reading's id: its time in nanoseconds, zero
// padded to 19 digits (so that ids sort by time as strings), the device,
// and its sequence number in 16 hex digits.
func appendReadingID(b []byte, r *buffer.OutboxReading) []byte {
	ts := strconv.AppendUint(nil, uint64(max(r.TS, 0)), 10)
	for range 19 - len(ts) {
		b = append(b, '0')
	}
	b = append(b, ts...)
	b = append(b, '-')
	b = append(b, r.Device...)
	b = append(b, '-')
	const hex = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hex[r.Seq>>uint(shift)&0xf])
	}
	return b
}

// escape is appendEscaped for a string.
func escape(s, special string) string {
	return string(appendEscaped(nil, s, special))
}

// appendEscaped appends s with a backslash before each byte of special,
// as line protocol wants in names and tag values.
func appendEscaped(b []byte, s, special string) []byte {
	if !strings.ContainsAny(s, special) {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(special, s[i]) >= 0 {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return b
}
