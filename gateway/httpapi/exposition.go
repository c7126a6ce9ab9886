package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// /metrics is written here in Prometheus's text format (version 0.0.4):
// the gateway has a few dozen counters and gauges, each read when it is
// scraped, which needs neither a client library's registry, its metric
// types nor its protocol buffers (about 0.7 MB of the binary;
// docs/performance.md).

// Desc describes a metric: its name, help text and label names.
type Desc struct {
	name, help string
	labels     []string
}

// NewDesc returns the description of the metric name, with labels.
func NewDesc(name, help string, labels ...string) *Desc {
	return &Desc{name: name, help: help, labels: labels}
}

// metricType is a family's TYPE line.
type metricType string

const (
	counterType metricType = "counter"
	gaugeType   metricType = "gauge"
)

// Collector puts its metrics, read now, into a Sink.
type Collector interface {
	Collect(s *Sink)
}

// CollectorFunc is a function as a Collector.
type CollectorFunc func(s *Sink)

// Collect implements Collector.
func (f CollectorFunc) Collect(s *Sink) { f(s) }

// Registry is what /metrics shows: the collectors registered, in turn.
type Registry struct {
	mu         sync.Mutex
	collectors []Collector
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{} }

// Register adds c to the collectors that /metrics reads.
func (r *Registry) Register(c Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// sample is one value of a metric, with its label values.
type sample struct {
	labels []string
	value  float64
}

// family is a metric's samples.
type family struct {
	desc    *Desc
	typ     metricType
	samples []sample
}

// Sink gathers the samples of a scrape, by metric.
type Sink struct {
	families map[string]*family
	err      error
}

// Counter adds a sample of the counter d.
func (s *Sink) Counter(d *Desc, v float64, labels ...string) { s.add(d, counterType, v, labels) }

// Gauge adds a sample of the gauge d.
func (s *Sink) Gauge(d *Desc, v float64, labels ...string) { s.add(d, gaugeType, v, labels) }

func (s *Sink) add(d *Desc, typ metricType, v float64, labels []string) {
	if len(labels) != len(d.labels) {
		s.fail(fmt.Errorf("metric %s: %d label values for %d labels", d.name, len(labels), len(d.labels)))
		return
	}
	f := s.families[d.name]
	if f == nil {
		f = &family{desc: d, typ: typ}
		s.families[d.name] = f
	} else if f.typ != typ || f.desc != d {
		s.fail(fmt.Errorf("metric %s: described twice", d.name))
		return
	}
	f.samples = append(f.samples, sample{labels: labels, value: v})
}

func (s *Sink) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Gather reads every collector and returns the metrics in the text
// format: families sorted by name, samples by their label values, as
// Prometheus's client library writes them.
func (r *Registry) Gather() ([]byte, error) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	s := &Sink{families: make(map[string]*family)}
	for _, c := range cs {
		c.Collect(s)
	}
	if s.err != nil {
		return nil, s.err
	}
	names := make([]string, 0, len(s.families))
	for name := range s.families {
		names = append(names, name)
	}
	slices.Sort(names)
	var b []byte
	for _, name := range names {
		f := s.families[name]
		slices.SortFunc(f.samples, func(a, b sample) int { return slices.Compare(a.labels, b.labels) })
		for i := 1; i < len(f.samples); i++ {
			if slices.Equal(f.samples[i-1].labels, f.samples[i].labels) {
				return nil, fmt.Errorf("metric %s: two samples with the labels %q", name, f.samples[i].labels)
			}
		}
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, helpEscaper.Replace(f.desc.help), name, f.typ)
		for _, sm := range f.samples {
			b = append(b, name...)
			if len(sm.labels) > 0 {
				b = append(b, '{')
				for i, v := range sm.labels {
					if i > 0 {
						b = append(b, ',')
					}
					b = append(b, f.desc.labels[i]...)
					b = append(b, `="`...)
					b = append(b, labelEscaper.Replace(v)...)
					b = append(b, '"')
				}
				b = append(b, '}')
			}
			b = append(b, ' ')
			b = appendValue(b, sm.value)
			b = append(b, '\n')
		}
	}
	return b, nil
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendValue appends v as the text format writes a value.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// metricsContentType is the text format's media type.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// metricsHandler serves r's metrics, gzipped for a client that accepts
// it (Prometheus does). A collector's fault is a 500 with the error, as
// the client library's handler answers.
func metricsHandler(r *Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := r.Gather()
		if err != nil {
			http.Error(w, "An error has occurred while gathering metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", metricsContentType)
		if !acceptsGzip(req.Header.Get("Accept-Encoding")) {
			w.Write(body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzipWriters.Get().(*gzip.Writer)
		defer func() {
			zw.Reset(nil) // the pool does not keep the response
			gzipWriters.Put(zw)
		}()
		zw.Reset(w)
		zw.Write(body)
		zw.Close()
	})
}

// gzipWriters keeps the scrapes' gzip writers, a writer's tables being
// about 1 MiB: reused while scrapes follow each other closely, let go by
// the collections after. Level 6 of klauspost/compress, the uplink's too:
// as fast as compress/gzip's best speed, and smaller.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, 6) // the level is valid
	return w
}}

// acceptsGzip says whether an Accept-Encoding header takes gzip.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		q = strings.ReplaceAll(q, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// CounterVec is a counter by the values of its labels.
type CounterVec struct {
	desc *Desc
	mu   sync.Mutex
	n    map[string]*labelCount
}

type labelCount struct {
	labels []string
	n      float64
}

// NewCounterVec returns a CounterVec of the metric d; it shows on
// /metrics once registered.
func NewCounterVec(d *Desc) *CounterVec {
	return &CounterVec{desc: d, n: make(map[string]*labelCount)}
}

// Inc adds one to the count of the label values labels.
func (c *CounterVec) Inc(labels ...string) {
	key := strings.Join(labels, "\xff")
	c.mu.Lock()
	defer c.mu.Unlock()
	lc := c.n[key]
	if lc == nil {
		lc = &labelCount{labels: labels}
		c.n[key] = lc
	}
	lc.n++
}

// Collect implements Collector.
func (c *CounterVec) Collect(s *Sink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, lc := range c.n {
		s.Counter(c.desc, lc.n, lc.labels...)
	}
}
