// Package dashboard renders cairn's local web page: the gateway's health,
// its devices with their latest values, and SVG charts of their metrics.
// It writes HTML and SVG from plain data the caller fills in (Page,
// Chart, LoginPage) and does no I/O of its own: the HTTP API reads the
// store and the counters, and serves what this package writes.
package dashboard
