package httpapi

import (
	"encoding/json"

	"github.com/cairn-gateway/cairn/buffer"
)

// A reading of a text series is answered with its text in "text" and no
// "value" (a number reading has "value" and no "text"), in /readings,
// /latest and /v1/devices alike.

// MarshalJSON writes r with "text" instead of "value" when r is a text
// reading.
func (r readingJSON) MarshalJSON() ([]byte, error) {
	if r.Text == "" {
		type number readingJSON // without the method
		return json.Marshal(number(r))
	}
	return json.Marshal(struct {
		Metric string `json:"metric"`
		TS     string `json:"ts"`
		Text   string `json:"text"`
	}{r.Metric, r.TS, r.Text})
}

// MarshalJSON writes l with "text" instead of "value" when l is the
// newest reading of a text series.
func (l latestJSON) MarshalJSON() ([]byte, error) {
	if l.Text == "" {
		type number latestJSON // without the method
		return json.Marshal(number(l))
	}
	return json.Marshal(struct {
		TS   string `json:"ts"`
		Text string `json:"text"`
		Unit string `json:"unit,omitempty"`
	}{l.TS, l.Text, l.Unit})
}

// textColumn reports whether a CSV of rs has a text column: whether
// one of them is a text reading. A CSV of numbers only keeps the four
// columns it always had.
func textColumn(rs []buffer.Reading) bool {
	for i := range rs {
		if rs[i].Text != "" {
			return true
		}
	}
	return false
}

// collectStates sends the text series of r, its newest reading, as a
// state set: cairn_state 1 with r's text as the state label, and 0 for
// each other text the series has held (at most
// store.max_states_per_series of them).
func (c *collector) collectStates(s *Sink, r buffer.Reading) {
	s.Gauge(c.state, 1, r.Device, r.Metric, r.Text)
	for _, text := range c.opts.Store.Texts(r.Device, r.Metric) {
		if text != r.Text {
			s.Gauge(c.state, 0, r.Device, r.Metric, text)
		}
	}
}
