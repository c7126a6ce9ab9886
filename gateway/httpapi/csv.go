package httpapi

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
)

// wantCSV reports whether a request of readings or stats asks for CSV:
// format=csv, or, without format, an Accept header that ranks text/csv
// above JSON (application/json, application/*, */*), or lists it first
// at the same rank. JSON is the default; a format other than csv or json
// is an error.
func wantCSV(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
	default:
		return false, fmt.Errorf("format: must be json or csv (got %q)", f)
	}
	var csvQ, jsonQ float64
	csvAt, jsonAt := -1, -1
	for i, part := range strings.Split(r.Header.Get("Accept"), ",") {
		typ, params, _ := strings.Cut(part, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(typ)) {
		case "text/csv":
			if csvAt < 0 || q > csvQ {
				csvQ, csvAt = q, i
			}
		case "application/json", "application/*", "*/*":
			if jsonAt < 0 || q > jsonQ {
				jsonQ, jsonAt = q, i
			}
		}
	}
	if csvAt < 0 || csvQ <= 0 {
		return false, nil
	}
	return jsonAt < 0 || csvQ > jsonQ || csvQ == jsonQ && csvAt < jsonAt, nil
}

// writeReadingsCSV answers readings of device (of metric, or of every
// metric when "") as CSV: a row a reading, with the unit of its metric.
// When rs hold a reading of a text series, a last column, text, holds
// its text, and its value is empty (textColumn).
func writeReadingsCSV(w http.ResponseWriter, device, metric string, rs []buffer.Reading, units map[string]string) {
	name := []string{device}
	if metric != "" {
		name = append(name, metric)
	}
	header := []string{"time", "metric", "value", "unit"}
	texts := textColumn(rs)
	if texts {
		header = append(header, "text")
	}
	cw := startCSV(w, name, header...)
	for _, r := range rs {
		cw.plain(r.Time().Format(time.RFC3339Nano))
		cw.text(r.Metric)
		if r.Text == "" {
			cw.plain(formatValue(r.Value))
		} else {
			cw.plain("")
		}
		cw.text(units[r.Metric])
		if texts {
			cw.text(r.Text)
		}
		cw.endRow()
	}
	cw.flush()
}

// writeStatsCSV answers the stats of a metric of device as CSV: a row a
// group, with the metric's unit.
func writeStatsCSV(w http.ResponseWriter, device, metric string, groups []buffer.StatsAt, unit string) {
	cw := startCSV(w, []string{device, metric}, "start", "count", "sum", "min", "max", "sumsqr", "mean", "stddev", "unit")
	for _, g := range groups {
		st := g.Stats
		cw.plain(time.Unix(0, g.Start).UTC().Format(time.RFC3339Nano))
		cw.plain(strconv.FormatUint(st.Count, 10))
		for _, v := range []float64{st.Sum, st.Min, st.Max, st.SumSqr, st.Mean(), st.StdDev()} {
			cw.plain(formatValue(v))
		}
		cw.text(unit)
		cw.endRow()
	}
	cw.flush()
}

// startCSV begins a CSV answer, to be saved as the file named by parts
// joined with "-" (csvFilename), with its header row.
func startCSV(w http.ResponseWriter, parts []string, header ...string) *csvWriter {
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+csvFilename(parts)+`"`)
	w.WriteHeader(http.StatusOK)
	cw := &csvWriter{w: bufio.NewWriter(w)}
	for _, name := range header {
		cw.plain(name)
	}
	cw.endRow()
	return cw
}

// csvWriter writes CSV as RFC 4180 has it, rows ending in "\n", with two
// kinds of cell: plain cells (numbers, times, the header's names), which
// are written as they are and must need no quoting, and text cells (names
// and units, which come from the sensors), which are always quoted and
// neutralised against formula injection (csvText). A write error is kept
// by the bufio.Writer: the client went away, and there is no one to tell.
type csvWriter struct {
	w     *bufio.Writer
	cells int // in the row being written
}

// plain writes a cell that needs no quoting.
func (c *csvWriter) plain(s string) {
	c.sep()
	c.w.WriteString(s) //nolint:errcheck // kept in c.w
}

// text writes a cell of text from outside: csvText(s), quoted.
func (c *csvWriter) text(s string) {
	c.sep()
	c.w.WriteByte('"')                                         //nolint:errcheck // kept in c.w
	c.w.WriteString(strings.ReplaceAll(csvText(s), `"`, `""`)) //nolint:errcheck // kept in c.w
	c.w.WriteByte('"')                                         //nolint:errcheck // kept in c.w
}

func (c *csvWriter) sep() {
	if c.cells > 0 {
		c.w.WriteByte(',') //nolint:errcheck // kept in c.w
	}
	c.cells++
}

func (c *csvWriter) endRow() {
	c.w.WriteByte('\n') //nolint:errcheck // kept in c.w
	c.cells = 0
}

func (c *csvWriter) flush() {
	c.w.Flush() //nolint:errcheck // the client went away; nothing to do
}

// csvText returns the text of a cell so that a spreadsheet reads it as
// text, never as a formula: one that begins with '=', '+', '-', '@', a
// tab or a carriage return (the characters OWASP's CSV Injection page
// lists) gets a single quote in front, which spreadsheets take as "this
// is text" and do not show. Only text cells go through it, so a value
// of -3.5 stays a number. Quoting the whole cell (csvWriter.text) keeps
// a separator inside it ("a;=1+1" in a locale that splits on ';') from
// starting a cell of its own.
func csvText(s string) string {
	if s != "" && strings.IndexByte("=+-@\t\r", s[0]) >= 0 {
		return "'" + s
	}
	return s
}

// csvFilename is the name of a CSV file of parts (a device, a metric):
// the parts joined with "-" and ".csv" added, each byte but ASCII
// letters, digits, '.', '_' and '-' made '_', so that it needs no quoting
// and names no directory.
func csvFilename(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('-')
		}
		for j := 0; j < len(p); j++ {
			c := p[j]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
				b.WriteByte(c)
			} else {
				b.WriteByte('_')
			}
		}
	}
	b.WriteString(".csv")
	return b.String()
}

// formatValue writes a value as encoding/json does: without an exponent
// from 1e-6 to 1e21, with one beyond.
func formatValue(v float64) string {
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
