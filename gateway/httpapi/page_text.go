package httpapi

import (
	"fmt"
	"math"
	"slices"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// textChart makes c, a chart of device's metric, the chart of a text
// series when the series is one (Store.IsText), and reports whether it
// is. The chart of a text series is
// drawn from the newest dashboard.MaxTexts readings of its range
// (Truncated when there are more), and for a series of states from the
// state in force at c.From too: the text of the last reading before it.
func (a *API) textChart(c *dashboard.Chart, device, metric string) (bool, error) {
	if !a.opts.Store.IsText(device, metric) {
		return false, nil
	}
	from, to := c.From.UnixNano(), c.To.UnixNano()
	// Newest first, straight into Texts: a Reading is four times the size.
	var ts []dashboard.Text
	err := a.opts.Store.Scan(buffer.Query{Device: device, Metric: metric, From: from, To: to + 1, Desc: true, Limit: dashboard.MaxTexts + 1}, func(r buffer.Reading) bool {
		ts = append(ts, dashboard.Text{Time: r.Time(), Text: r.Text})
		return true
	})
	if err != nil {
		return false, fmt.Errorf("readings of %s %s: %w", device, metric, err)
	}
	if len(ts) > dashboard.MaxTexts {
		ts, c.Truncated = ts[:dashboard.MaxTexts], true
	}
	slices.Reverse(ts)
	c.Texts = ts
	c.Events = dashboard.IsEvent(metric)
	if c.Events || c.Truncated {
		return true, nil
	}
	before, err := a.opts.Store.Readings(buffer.Query{Device: device, Metric: metric, From: math.MinInt64, To: from, Desc: true, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("reading of %s %s before %v: %w", device, metric, c.From, err)
	}
	if len(before) == 1 {
		c.Before = before[0].Text
	}
	return true, nil
}
