package uplink

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cairn-gateway/cairn/buffer"
)

// promSample and promTimeSeries are a remote write request as a receiver
// reads it.
type promSample struct {
	Value float64
	MS    int64
}

type promTimeSeries struct {
	Labels  [][2]string
	Samples []promSample
}

// decodeWriteRequest reads a snappy-compressed WriteRequest, field by
// field, refusing any field a WriteRequest of cairn's has not.
func decodeWriteRequest(body []byte) ([]promTimeSeries, error) {
	pb, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	var out []promTimeSeries
	err = eachField(pb, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return fmt.Errorf("WriteRequest: field %d type %d", num, typ)
		}
		var ts promTimeSeries
		err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				var l [2]string
				err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if (num != 1 && num != 2) || typ != protowire.BytesType {
						return fmt.Errorf("Label: field %d type %d", num, typ)
					}
					l[num-1] = string(v)
					return nil
				})
				ts.Labels = append(ts.Labels, l)
				return err
			case num == 2 && typ == protowire.BytesType:
				var s promSample
				err := eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
					switch {
					case num == 1 && typ == protowire.Fixed64Type:
						s.Value = math.Float64frombits(x)
					case num == 2 && typ == protowire.VarintType:
						s.MS = int64(x)
					default:
						return fmt.Errorf("Sample: field %d type %d", num, typ)
					}
					return nil
				})
				ts.Samples = append(ts.Samples, s)
				return err
			}
			return fmt.Errorf("TimeSeries: field %d type %d", num, typ)
		})
		out = append(out, ts)
		return err
	})
	return out, err
}

// eachField calls fn with each field of the message b: its bytes for a
// length-delimited field, else its number.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			return fmt.Errorf("field %d: wire type %d", num, typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

func TestEncoder_PrometheusSeriesLabelsAndOrder(t *testing.T) {
	e := newEncoder(Prometheus, "readings", "gw-1")
	rs := []buffer.OutboxReading{
		outboxReading("dev-b", "temp", "°C", 3e9+999_999, 21.5),
		outboxReading("dev-a", "temp", "°C", 2e9, 20),
		outboxReading("dev-b", "temp", "°C", 1e9, 19.25), // late: goes first in its series
		outboxReading("dev-a", "rssi", "", 2e9, -70),
		outboxReading("dev-a", "1st.value-x", "", 2e9, 1),
		outboxReading("dev-a", "nan", "", 2e9, math.NaN()),
		outboxReading("dev-\xff", "temp", "°C", 4e9, 1),
		outboxReading("dev-a", "rssi", "", 2e9+1, -71), // the same millisecond: the last stored goes
		outboxReading("dev-a", "rssi", "", 2e9+2, -72),
	}
	body, skipped := e.encode("gw-1-0", rs)
	if skipped != 1 {
		t.Errorf("skipped %d, want 1 (the NaN)", skipped)
	}
	got, err := decodeWriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	labels := func(name, device, unit string) [][2]string {
		l := [][2]string{{"__name__", name}, {"device", device}, {"gateway", "gw-1"}}
		if unit != "" {
			l = append(l, [2]string{"unit", unit})
		}
		return l
	}
	want := []promTimeSeries{
		{labels("readings_1st_value_x", "dev-a", ""), []promSample{{1, 2000}}},
		{labels("readings_rssi", "dev-a", ""), []promSample{{-72, 2000}}},
		{labels("readings_temp", "dev-a", "°C"), []promSample{{20, 2000}}},
		{labels("readings_temp", "dev-b", "°C"), []promSample{{19.25, 1000}, {21.5, 3000}}},
		{labels("readings_temp", "dev-\uFFFD", "°C"), []promSample{{1, 4000}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}

func TestAppendPromName(t *testing.T) {
	for _, tc := range []struct{ prefix, metric, want string }{
		{"readings_", "temperature", "readings_temperature"},
		{"readings_", "air.temp-1", "readings_air_temp_1"},
		{"readings_", "température", "readings_temp_rature"},
		{"readings_", "a:b", "readings_a:b"},
		{"9x_", "v", "_9x_v"},
		{"", "", "_"},
	} {
		if got := string(appendPromName([]byte("keep"), tc.prefix, tc.metric)); got != "keep"+tc.want {
			t.Errorf("appendPromName(%q, %q) = %q, want %q", tc.prefix, tc.metric, got, "keep"+tc.want)
		}
	}
}

// FuzzEncoder_PrometheusRoundTrip encodes readings and decodes them back:
// every finite reading is in the series of its labels, once, with its
// value and its time in milliseconds; labels are valid and sorted;
// samples are in time order; one series per label set.
func FuzzEncoder_PrometheusRoundTrip(f *testing.F) {
	f.Add("readings", "gw", "dev-1", "temp", "°C", int64(1_700_000_000_123_456_789), 21.5, "dev-2", "hum", "", int64(1_700_000_000_000_000_000), 40.0)
	f.Add("m", "", "a b", "x.y", "\xff", int64(0), -0.0, "a b", "x.y", "\xff", int64(-5_000_000), math.Inf(1))
	f.Add("9", "g\x00", "", "", "", int64(1<<62), 1e300, "", "_", "", int64(1<<62), 1.0)
	f.Fuzz(func(t *testing.T, measurement, gateway, dev1, metric1, unit1 string, ts1 int64, v1 float64, dev2, metric2, unit2 string, ts2 int64, v2 float64) {
		e := newEncoder(Prometheus, measurement, gateway)
		var rs []buffer.OutboxReading
		for i := range 6 { // the two readings, interleaved at several times
			r := outboxReading(dev1, metric1, unit1, ts1-int64(i%3)*1e6, v1+float64(i))
			if i%2 == 1 {
				r = outboxReading(dev2, metric2, unit2, ts2+int64(i)*1e6, v2)
			}
			r.Seq = uint64(i)
			rs = append(rs, r)
		}
		body, skipped := e.encode("id", rs)
		got, err := decodeWriteRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		// Of the readings of one series in one millisecond, the one with
		// the latest timestamp goes, of equal ones the last stored.
		type rawKey struct {
			metric, device, unit string
			ms                   int64
		}
		latest := make(map[rawKey]buffer.OutboxReading)
		wantSkipped := 0
		for _, r := range rs {
			if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
				wantSkipped++
				continue
			}
			k := rawKey{r.Metric, r.Device, r.Unit, r.TS / 1e6}
			if l, ok := latest[k]; !ok || r.TS >= l.TS {
				latest[k] = r
			}
		}
		want := make(map[string][]promSample)
		for _, r := range latest {
			l := [][2]string{{"__name__", string(appendPromName(nil, measurement+"_", r.Metric))}, {"device", validUTF8(r.Device)}}
			if gateway != "" {
				l = append(l, [2]string{"gateway", validUTF8(gateway)})
			}
			if r.Unit != "" {
				l = append(l, [2]string{"unit", validUTF8(r.Unit)})
			}
			k := fmt.Sprint(l)
			want[k] = append(want[k], promSample{r.Value, r.TS / 1e6})
		}
		if skipped != wantSkipped {
			t.Errorf("skipped %d, want %d", skipped, wantSkipped)
		}
		seen := make(map[string][]promSample)
		for _, ts := range got {
			for i, l := range ts.Labels {
				if i > 0 && ts.Labels[i-1][0] >= l[0] {
					t.Errorf("labels not sorted: %q", ts.Labels)
				}
				if !utf8.ValidString(l[1]) {
					t.Errorf("label %q not UTF-8: %q", l[0], l[1])
				}
			}
			name := ts.Labels[0][1]
			if ts.Labels[0][0] != "__name__" || name == "" || name[0] >= '0' && name[0] <= '9' ||
				strings.IndexFunc(name, func(r rune) bool { return r >= utf8.RuneSelf || !promNameChar(byte(r)) }) >= 0 {
				t.Errorf("bad metric name label %q", ts.Labels[0])
			}
			if !slices.IsSortedFunc(ts.Samples, func(a, b promSample) int { return int(min(max(a.MS-b.MS, -1), 1)) }) {
				t.Errorf("samples not in time order: %v", ts.Samples)
			}
			seen[fmt.Sprint(ts.Labels)] = append(seen[fmt.Sprint(ts.Labels)], ts.Samples...)
		}
		if len(seen) < len(got) && len(got) > 0 {
			// Two series of one label set: two metrics that become one name
			// (a.b and a_b) may do so, nothing else.
			if appendPromNameEq(measurement, metric1, metric2) {
				t.Skip("two metrics make one name")
			}
			t.Errorf("%d series for %d label sets", len(got), len(seen))
		}
		for k, w := range want {
			g := seen[k]
			sortSamples := func(s []promSample) {
				slices.SortFunc(s, func(a, b promSample) int {
					if a.MS != b.MS {
						return int(min(max(a.MS-b.MS, -1), 1))
					}
					return int(min(max(a.Value-b.Value, -1), 1))
				})
			}
			sortSamples(g)
			sortSamples(w)
			if !reflect.DeepEqual(g, w) && !(len(g) == len(w) && fmt.Sprint(g) == fmt.Sprint(w)) {
				t.Errorf("series %s: got %v, want %v", k, g, w)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("%d label sets, want %d", len(seen), len(want))
		}
	})
}

// validUTF8 is s with each byte that is not UTF-8 replaced by U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // utf8.RuneError for a bad byte
		i += n
	}
	return b.String()
}

// appendPromNameEq reports whether two different metrics get one name.
func appendPromNameEq(measurement, a, b string) bool {
	return a != b && bytes.Equal(appendPromName(nil, measurement+"_", a), appendPromName(nil, measurement+"_", b))
}

// TestEncoder_BytesPerReading logs what a batch of readings costs
// upstream in each format, with gzip (influx and json) and without.
func TestEncoder_BytesPerReading(t *testing.T) {
	var rs []buffer.OutboxReading
	// 100 sensors, 2 metrics each, 25 messages: a batch of 5,000 readings.
	for i := range 25 {
		for d := range 100 {
			ts := int64(1_700_000_000_000+i*1000+d) * 1e6
			rs = append(rs,
				outboxReading(fmt.Sprintf("sensor-%03d", d), "temperature", "°C", ts, float64(200+(i*7+d)%50)/10),
				outboxReading(fmt.Sprintf("sensor-%03d", d), "humidity", "%", ts, float64(400+(i*3+d)%200)/10))
		}
	}
	for _, f := range []Format{Influx, JSON, Prometheus} {
		e := newEncoder(f, "readings", "pi-kitchen")
		body, _ := e.encode("pi-kitchen-1", rs)
		if f == Prometheus {
			t.Logf("%-10s %6.2f bytes per reading (snappy)", f, float64(len(body))/float64(len(rs)))
			continue
		}
		t.Logf("%-10s %6.2f bytes per reading, %6.2f gzipped", f, float64(len(body))/float64(len(rs)), float64(gzipLen(t, body))/float64(len(rs)))
	}
}

// BenchmarkEncoder_Formats encodes one batch of 5,000 readings in each
// format, with the encoder's buffers reused as the uplink reuses them.
func BenchmarkEncoder_Formats(b *testing.B) {
	var rs []buffer.OutboxReading
	for i := range 25 {
		for d := range 100 {
			ts := int64(1_700_000_000_000+i*1000+d) * 1e6
			rs = append(rs,
				outboxReading(fmt.Sprintf("sensor-%03d", d), "temperature", "°C", ts, float64(200+(i*7+d)%50)/10),
				outboxReading(fmt.Sprintf("sensor-%03d", d), "humidity", "%", ts, float64(400+(i*3+d)%200)/10))
		}
	}
	for _, f := range []Format{Influx, JSON, Prometheus} {
		b.Run(f.String(), func(b *testing.B) {
			e := newEncoder(f, "readings", "pi-kitchen")
			b.ReportAllocs()
			for b.Loop() {
				body, _ := e.encode("pi-kitchen-1", rs)
				b.SetBytes(int64(len(body)))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rs)), "ns/reading")
		})
	}
}
