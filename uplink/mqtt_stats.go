package uplink

import (
	"context"
	"strconv"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/buffer"
)

// With Data Stats, an MQTT upstream publishes the records of a batch
// (stats.go) instead of readings: the records of one device and topic
// (the template filled in with the record's device and metric) go
// together, as many messages as MaxMessageBytes needs, each in the
// format of Payload (docs/uplink.md shows each):
//
//   - cairn's JSON: {"gateway":…,"device":…,"batch":…,"group":"minute",
//     "stats":[…]}, each record as in the JSON of the HTTP upstreams,
//     with its id (statsID), which stays the same when it goes again.
//   - SenML: per record five SenML records named <metric>_count,
//     _sum, _min, _max and _mean, the first with the base name
//     urn:dev:cairn:{gateway}:{device}: and the period's start as base
//     time (bt, in seconds), the unit on all but count, and the record's
//     id as cairn_id on each.
//   - line protocol: the lines of the HTTP upstreams' influx format.
//
// A record sent again after a late reading holds the same id and time,
// with the new values.

// publishStats publishes recs, the records of the batch id that stands
// for n readings, until the broker took every message, and then moves
// the cursor to end.
func (u *Uplink) publishStats(ctx context.Context, id string, recs []statsRecord, n int, end uint64) error {
	msgs, skipped := u.statsMessages(id, recs)
	if skipped > 0 {
		u.mu.Lock()
		u.st.Skipped += uint64(skipped)
		u.mu.Unlock()
	}
	if len(msgs) > 0 {
		if err := u.deliver(ctx, id, msgs, n); err != nil {
			return err
		}
	}
	return u.out.AdvanceOutbox(end)
}

// statsMessages writes recs, the records of the batch id, as the
// messages of an MQTT upstream. A record the format cannot carry (a
// name SenML or line protocol cannot hold, a period SenML would read as
// relative), or alone over MaxMessageBytes, is left out and counted in
// skipped; the latter is logged.
func (u *Uplink) statsMessages(id string, recs []statsRecord) (msgs []mqttMessage, skipped int) {
	group := u.opts.Group
	lines := newEncoder(Influx, u.opts.Measurement, u.opts.Gateway)
	limit := u.opts.MQTT.MaxMessageBytes
	var open, sep, closing []byte
	switch u.opts.MQTT.Payload {
	case MessageSenML:
		open, sep, closing = []byte("["), []byte(","), []byte("]")
	case 0:
		sep, closing = []byte(","), []byte("]}\n")
	}
	var body, rec []byte
	topic := ""
	flush := func() {
		if body != nil {
			msgs = append(msgs, mqttMessage{topic: topic, payload: append(body, closing...)})
			body = nil
		}
	}
	for i := range recs {
		r := &recs[i]
		var at buffer.OutboxReading
		at.Device, at.Metric = r.device, r.metric
		t := u.topic(&at)
		if i > 0 && (t != topic || r.device != recs[i-1].device) {
			flush()
		}
		topic = t
		if u.opts.MQTT.Payload == 0 {
			open = mqttStatsHead(u.opts.Gateway, r.device, id, group)
		}
		var ok bool
		switch u.opts.MQTT.Payload {
		case MessageSenML:
			rec, ok = appendStatsSenML(rec[:0], u.opts.Gateway, group, r)
		case MessageInflux:
			line, skip := lines.statsInflux(group, recs[i:i+1])
			rec, ok = append(rec[:0], line...), skip == 0
		default:
			rec, ok = appendStatsJSON(rec[:0], group, r), true
		}
		if !ok {
			skipped++
			continue
		}
		if size := len(open) + len(rec) + len(closing); size > limit {
			skipped++
			u.log.Error("a record alone is over max_message_bytes; left out", "topic", t, "device", r.device,
				"metric", r.metric, "bytes", size, "max_message_bytes", limit)
			continue
		}
		if body != nil && len(body)+len(sep)+len(rec)+len(closing) > limit {
			flush()
		}
		if body == nil {
			body = append([]byte(nil), open...)
		} else {
			body = append(body, sep...)
		}
		body = append(body, rec...)
	}
	flush()
	return msgs, skipped
}

// mqttStatsHead begins a JSON message of records of the batch id:
//
//	{"gateway":"pi-kitchen","device":"kitchen","batch":"pi-kitchen-1200","group":"minute","stats":[…]}
func mqttStatsHead(gateway, device, id string, group aggregate.Level) []byte {
	b := mqttHead(gateway, device, id)
	b = append(b[:len(b)-len(`"readings":[`)], `"group":"`...)
	b = append(b, group.String()...)
	return append(b, `","stats":[`...)
}

// appendStatsSenML appends the five SenML records of r; ok is false when
// SenML cannot carry it.
func appendStatsSenML(b []byte, gateway string, group aggregate.Level, r *statsRecord) (_ []byte, ok bool) {
	if !SenMLName(gateway) || !SenMLName(r.device) || !SenMLName(r.metric) || r.start < senmlBaseRelative*1e9 {
		return b, false
	}
	for k, stat := range statNames {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if k == 0 {
			b = append(b, `"bn":"urn:dev:cairn:`...)
			b = append(b, gateway...)
			b = append(b, ':')
			b = append(b, r.device...)
			b = append(b, `:","bt":`...)
			b = appendSeconds(b, r.start)
			b = append(b, ',')
		}
		b = append(b, `"n":"`...)
		b = append(b, r.metric...)
		b = append(b, '_')
		b = append(b, stat...)
		b = append(b, `","v":`...)
		b = strconv.AppendFloat(b, statValue(r.stats, k), 'g', -1, 64)
		if k > 0 && r.unit != "" {
			b = append(b, `,"u":`...)
			b = appendJSONString(b, r.unit)
		}
		b = append(b, `,"cairn_id":"`...)
		b = appendStatsID(b, group, r)
		b = append(b, `"}`...)
	}
	return b, true
}
