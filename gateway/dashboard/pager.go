package dashboard

import (
	"net/url"
	"strconv"
)

// pager is what the charts part says of ChartPages: which metrics are
// charted, of how many, and the links to the pages before and after.
type pager struct {
	// Show is whether there is anything to say: more metrics than one
	// page charts, or a filter.
	Show bool
	ChartPages
	// First and Last number the charted metrics among the matching ones
	// (from 1); Pages is how many pages the matching ones take.
	First, Last, Pages int
	// Prev and Next are the queries of the pages before and after, ""
	// when there is none.
	Prev, Next string
}

// newPager derives the pager of p's charts.
func newPager(p Page) pager {
	cp := p.ChartPages
	if cp.PerPage <= 0 || cp.Metrics == 0 && cp.Matching == 0 {
		cp.Metrics, cp.Matching, cp.PerPage = len(p.Charts), len(p.Charts), max(len(p.Charts), 1)
	}
	cp.Page = max(cp.Page, 1)
	g := pager{ChartPages: cp, Show: cp.Metrics > cp.PerPage || cp.Filter != ""}
	g.Pages = max((cp.Matching+cp.PerPage-1)/cp.PerPage, 1)
	if len(p.Charts) > 0 {
		g.First = (cp.Page-1)*cp.PerPage + 1
		g.Last = g.First + len(p.Charts) - 1
	}
	if cp.Page > 1 {
		g.Prev = pageQuery(p, cp.Page-1)
	}
	if cp.Page < g.Pages {
		g.Next = pageQuery(p, cp.Page+1)
	}
	return g
}

// pageQuery is the query of the page that charts the n-th page of p's
// metrics.
func pageQuery(p Page, n int) string {
	q := url.Values{"device": {p.Device}, "range": {p.Range.String()}}
	if p.Filter != "" {
		q.Set("filter", p.Filter)
	}
	if n > 1 {
		q.Set("page", strconv.Itoa(n))
	}
	return "?" + q.Encode() + "#charts"
}
