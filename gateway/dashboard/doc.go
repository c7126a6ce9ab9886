// Package dashboard renders cairn's local web page: the gateway's health,
// its devices with the latest value of each metric, and SVG charts of one
// device's metrics. It writes HTML and SVG from plain data that the
// caller fills in (Page, Chart, LoginPage) and does no I/O of its own:
// the HTTP API reads the store and the counters, and serves what this
// package writes. docs/dashboard.md describes the page for its readers.
//
// # The page and its parts
//
// WritePage writes the whole page: inline CSS and a few lines of plain
// JavaScript, no external asset, no framework. Three parts of it, named
// PartHealth, PartDevices and PartCharts, are reloaded by the script
// every Page.Refresh: it fetches the page's own path with the query
//
//	?part=NAME&device=DEVICE&range=RANGE&tz=ZONE
//
// and replaces the part's content with the answer, which the server
// writes with WritePart. A part is not reloaded while the browser's tab
// is hidden or while the keyboard focus is inside it. An answer of 401
// makes the script reload the page (which then shows the login form);
// any other failure is ignored until the next round. The range buttons
// (1h, 24h, 7d, 90d: Range) are buttons of a GET form with the fields
// device and range, so they work without the script too; with it, they
// fetch the charts part alone and set aria-pressed.
//
// # Many metrics
//
// A device's metrics are charted a page at a time (ChartPages): the
// caller charts only the metrics of the page asked for, says how many
// there are, and the charts part then links to the pages before and
// after, and the page offers a GET form that filters the metrics by
// name (query filter). The script sends filter and page with the
// charts part. A Device of the list may carry the latest values of its
// first metrics only, and how many More it has.
//
// # Charts
//
// A Chart is drawn from the Stats records of one series: Range.Level
// says which level to read for a range (minutes for 1h and 24h, hours
// for 7d and 90d), and WriteChart merges records into at most MaxColumns
// columns. Each column shows the band from its lowest to its highest
// reading and the mean of its readings; a column without a record is a
// gap that no line crosses. For 1h (Range.Raw) the caller also gives the
// raw readings, drawn as a line and, when few, as dots.
//
// A Chart with Texts is the chart of a text series, drawn from its
// readings (at most MaxTexts, the newest): a series of states as a
// timeline of bands, each state from its reading until the next, in a
// colour of its own, and a series of events (IsEvent) as a tick at each
// event; a legend under it names each state with its share of the time,
// or each event with its count. Texts come from devices and are escaped;
// bands are merged into at most MaxColumns columns and the legend names
// at most twelve texts, the rest as others, so that the SVG stays
// bounded however many readings and states there are.
//
// # Time zones
//
// Every time label of a chart carries its time in Unix milliseconds
// (data-t) and a fallback text in Chart.Location (UTC when nil); the
// page's script rewrites the text in the browser's zone and language.
// Ticks fall on the wall clock of Chart.Location (or Page.Location): the
// script sends the browser's IANA zone as tz, and when the charts were
// drawn for another zone it asks for them again at once. The server
// should pass time.LoadLocation(tz) as Page.Location, and UTC when tz
// is empty or unknown.
//
// # Login
//
// When the API has a bearer token (http.token_file), a browser cannot
// send it: the server answers the page without a valid session with
// WriteLogin. Its form POSTs the fields token and next to /login; the
// server compares the token in constant time, sets the cookie
// SessionCookie ("cairn_session": HttpOnly, SameSite=Strict, Path=/, and
// Secure when the request came over TLS) to a random session id it keeps (never the token
// itself), and redirects to LocalPath(next). Requests with that cookie
// count as carrying the token.
package dashboard
