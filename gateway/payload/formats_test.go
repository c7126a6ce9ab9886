package payload

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// fixture is one of testdata/formats/*.txt (testkit.Fixture says how
// they are written), with its format parsed.
type fixture struct {
	testkit.Fixture
	format Format
}

// loadFixtures returns the fixtures of format.
func loadFixtures(t testing.TB, format Format) []fixture {
	t.Helper()
	var out []fixture
	for _, fx := range testkit.LoadFixtures(t, filepath.Join("testdata", "formats")) {
		f, err := ParseFormat(fx.Format)
		if err != nil {
			t.Fatalf("%s: %v", fx.Name, err)
		}
		if f == format {
			out = append(out, fixture{fx, f})
		}
	}
	return out
}

// TestDecode_Fixtures decodes the examples of the SenML and line protocol
// specifications, with their format and with auto.
func TestDecode_Fixtures(t *testing.T) {
	n := 0
	for _, format := range []Format{FormatSenML, FormatInflux} {
		for _, fx := range loadFixtures(t, format) {
			n++
			for _, f := range []Format{format, FormatAuto} {
				t.Run(fx.Name+"/"+f.String(), func(t *testing.T) {
					var d Decoder
					got, ignored, err := d.Decode(nil, f, fx.Payload, fx.Device, fx.Metric, testRecv)
					if reason := RejectReason(err); reason != fx.Reject {
						t.Fatalf("reason %q (%v), want %q", reason, err, fx.Reject)
					}
					var want []buffer.Reading
					for _, r := range fx.Readings {
						want = append(want, buffer.Reading{Device: r.Device, Metric: r.Metric, TS: r.TS(testRecv), Value: r.Value, Text: r.Text, Unit: r.Unit})
					}
					if err == nil && !reflect.DeepEqual(noWords(t, got), want) {
						t.Errorf("\n got %+v\nwant %+v", got, want)
					}
					if got := droppedReasons(&d); !slices.Equal(got, fx.Dropped) {
						t.Errorf("dropped %q, want %q", got, fx.Dropped)
					}
					if fx.Reject == "" && (ignored != fx.Ignored || d.Restamped() != fx.Restamped) {
						t.Errorf("ignored %d, restamped %d; want %d, %d", ignored, d.Restamped(), fx.Ignored, fx.Restamped)
					}
				})
			}
		}
	}
	if n < 19 {
		t.Errorf("%d fixtures, want 19", n)
	}
}

// droppedReasons returns the reasons of the fields d's last call left
// out, nil for none.
func droppedReasons(d *Decoder) []string {
	var out []string
	for _, e := range d.Dropped() {
		out = append(out, e.Reason)
	}
	return out
}

func TestDecode_TextValues(t *testing.T) {
	var cases []decodeCase
	for _, tc := range []struct {
		text string
		want float64
	}{
		{"23.5", 23.5}, {" -3 ", -3}, {"+1e3", 1000}, {".5", 0.5}, {"007", 7},
		{"ON", 1}, {"on", 1}, {"Off", 0}, {"OPEN", 1}, {"closed", 0}, {"True", 1}, {"FALSE", 0},
	} {
		cases = append(cases,
			decodeCase{"value " + tc.text, FormatValue, tc.text, "d", "m", []buffer.Reading{rd("d", "m", recvNS, tc.want)}, 0},
			decodeCase{"json " + tc.text, FormatJSON, `{"m":"` + tc.text + `","x":1}`, "d", "", []buffer.Reading{rd("d", "m", recvNS, tc.want), rd("d", "x", recvNS, 1)}, 0},
			decodeCase{"senml " + tc.text, FormatSenML, `[{"n":"m","vs":"` + tc.text + `"}]`, "d", "", []buffer.Reading{rd("d", "m", recvNS, tc.want)}, 0},
			decodeCase{"influx " + tc.text, FormatInflux, `s m="` + tc.text + `"`, "d", "", []buffer.Reading{rd("d", "s.m", recvNS, tc.want)}, 0},
		)
	}
	for _, missing := range []string{"", " ", "nan", "NaN", "-nan", "None", "null", "NULL", "unavailable", "Unknown"} {
		cases = append(cases,
			decodeCase{"value missing " + missing, FormatValue, missing, "d", "m", nil, 1},
			decodeCase{"auto missing " + missing, FormatAuto, missing, "d", "m", nil, 1},
			decodeCase{"json missing " + missing, FormatJSON, `{"m":"` + missing + `"}`, "d", "", nil, 1},
			decodeCase{"json missing with a reading " + missing, FormatJSON, `{"m":"` + missing + `","x":2}`, "d", "", []buffer.Reading{rd("d", "x", recvNS, 2)}, 1},
			decodeCase{"senml missing " + missing, FormatSenML, `[{"n":"m","vs":"` + missing + `"}]`, "d", "", nil, 1},
			decodeCase{"influx missing " + missing, FormatInflux, `s m="` + missing + `"`, "d", "", nil, 1},
		)
	}
	cases = append(cases,
		decodeCase{"json null alone", FormatJSON, `{"t":null,"unit":"C"}`, "d", "", nil, 2},
		decodeCase{"json missing needs no device", FormatJSON, `{"t":"unavailable"}`, "", "", nil, 1},
		decodeCase{"json escaped number", FormatJSON, `{"t":"2\u0033.5"}`, "d", "", []buffer.Reading{rd("d", "t", recvNS, 23.5)}, 0},
		decodeCase{"json label", FormatJSON, `{"t":"23.5 C","u":1}`, "d", "", []buffer.Reading{txt("d", "t", recvNS, "23.5 C"), rd("d", "u", recvNS, 1)}, 0},
		decodeCase{"json Kelvin sign is no k", FormatJSON, "{\"t\":\"un\u212anown\",\"u\":1}", "d", "", []buffer.Reading{txt("d", "t", recvNS, "un\u212anown"), rd("d", "u", recvNS, 1)}, 0},
	)
	runDecodeCases(t, cases)
}

func TestDecode_JSONArray(t *testing.T) {
	const J = FormatJSON
	runDecodeCases(t, []decodeCase{
		{"two devices", J, `[{"device":"a","t":1},{"device":"b","t":2}]`, "", "",
			[]buffer.Reading{rd("a", "t", recvNS, 1), rd("b", "t", recvNS, 2)}, 0},
		{"own times", J, ` [ {"ts":1763800000,"t":1} , {"Time":"2026-11-22T10:00:01Z","t":2,"unit":"C"} ] `, "d", "",
			[]buffer.Reading{rd("d", "t", 1763800000e9, 1), rd("d", "t", recvNS+1e9, 2)}, 1},
		{"auto", FormatAuto, `[{"t":1},{"n2":2}]`, "d", "", []buffer.Reading{rd("d", "t", recvNS, 1), rd("d", "n2", recvNS, 2)}, 0},
		{"value named by topic in each", J, `[{"value":1},{"value":2,"x":3}]`, "d", "temp",
			[]buffer.Reading{rd("d", "temp", recvNS, 1), rd("d", "value", recvNS, 2), rd("d", "x", recvNS, 3)}, 0},
		{"empty element", J, `[{},{"t":1}]`, "d", "", []buffer.Reading{rd("d", "t", recvNS, 1)}, 0},
		{"topic device wins in each", J, `[{"device":"a","t":1},{"device":"b","t":2}]`, "d", "",
			[]buffer.Reading{rd("d", "t", recvNS, 1), rd("d", "t", recvNS, 2)}, 2},
		{"restamped element", J, `[{"ts":0,"t":1},{"ts":1763800000,"t":2}]`, "d", "",
			[]buffer.Reading{rd("d", "t", recvNS, 1), rd("d", "t", 1763800000e9, 2)}, 0},
	})
	for _, tc := range []struct {
		payload, reason string
	}{
		{`[{"device":"a","t":1},{"t":2}]`, ReasonBadDevice},
		{`[{"device":"a","t":1},{"device":"a","t":"1e999"}]`, ReasonNonFinite},
		{`[{"device":"a","t":1},{"device":"a","ts":"x","t":2}]`, ReasonBadTimestamp},
	} {
		var d Decoder
		if _, _, err := d.Decode(nil, J, []byte(tc.payload), "", "", testRecv); RejectReason(err) != tc.reason {
			t.Errorf("Decode(%s): %v, want %s", tc.payload, err, tc.reason)
		}
	}
}

func TestDecode_SenML(t *testing.T) {
	const S = FormatSenML
	runDecodeCases(t, []decodeCase{
		{"absolute time", S, `[{"bn":"d:","n":"t","t":1763800000.25,"v":1}]`, "", "", []buffer.Reading{rd("d", "t", 1763800000250000000, 1)}, 0},
		{"relative time", S, `[{"bn":"d:","n":"t","t":-60,"v":1},{"n":"t","t":2.5,"v":2}]`, "", "",
			[]buffer.Reading{rd("d", "t", recvNS-60e9, 1), rd("d", "t", recvNS+25e8, 2)}, 0},
		{"relative base time", S, `[{"bt":-10,"bn":"d/","n":"t","v":1},{"n":"t","t":5,"v":2}]`, "", "",
			[]buffer.Reading{rd("d", "t", recvNS-10e9, 1), rd("d", "t", recvNS-5e9, 2)}, 0},
		{"restamped absolute time", S, `[{"bn":"d:","n":"t","t":300000000,"v":1}]`, "", "", []buffer.Reading{rd("d", "t", recvNS, 1)}, 0},
		{"base value", S, `[{"bn":"d:","bv":100,"n":"a","v":1},{"n":"b","v":-1},{"n":"c","vs":"5"}]`, "", "",
			[]buffer.Reading{rd("d", "a", recvNS, 101), rd("d", "b", recvNS, 99), rd("d", "c", recvNS, 5)}, 0},
		{"sum ignored", S, `[{"bn":"d:","n":"e","s":12,"v":1},{"n":"f","s":3,"bs":1}]`, "", "", []buffer.Reading{rd("d", "e", recvNS, 1)}, 2},
		{"topic device, n is the metric", S, `[{"n":"urn:x","v":1}]`, "dev", "temp", []buffer.Reading{rd("dev", "urn:x", recvNS, 1)}, 0},
		{"topic device and metric", S, `[{"bn":"urn:x","v":1}]`, "dev", "temp", []buffer.Reading{rd("dev", "temp", recvNS, 1)}, 0},
		{"topic metric beats unit", S, `[{"n":"urn:x","u":"Cel","v":1}]`, "", "temp", []buffer.Reading{withUnit(rd("urn:x", "temp", recvNS, 1), "Cel")}, 0},
		{"unit as metric", S, `[{"bn":"x","u":"m/s2","v":1}]`, "", "", []buffer.Reading{withUnit(rd("x", "m/s2", recvNS, 1), "m/s2")}, 0},
		{"base unit, record unit", S, `[{"bn":"x:","bu":"Cel","n":"a","v":1},{"n":"b","u":"%RH","v":2},{"n":"c","v":3}]`, "", "", []buffer.Reading{withUnit(rd("x", "a", recvNS, 1), "Cel"), withUnit(rd("x", "b", recvNS, 2), "%RH"), withUnit(rd("x", "c", recvNS, 3), "Cel")}, 0},
		{"unit not a unit", S, `[{"bn":"x:","n":"a","u":"\u0001","v":1}]`, "", "", []buffer.Reading{rd("x", "a", recvNS, 1)}, 0},
		{"unknown fields ignored", S, `[{"bn":"d:","n":"t","v":1,"ut":5,"x":{"y":[1]},"bver":10}]`, "", "", []buffer.Reading{rd("d", "t", recvNS, 1)}, 0},
		{"escaped name", S, `[{"bn":"d\u003a","n":"\u0074","v":1}]`, "", "", []buffer.Reading{rd("d", "t", recvNS, 1)}, 0},
		{"one trailing separator only", S, `[{"bn":"d::","n":"t","v":1}]`, "", "", []buffer.Reading{rd("d:", "t", recvNS, 1)}, 0},
		{"only missing", S, `[{"bn":"d:","n":"t","vs":"unavailable"}]`, "", "", nil, 1},
	})
	for _, tc := range []struct {
		payload, device, reason, detail string
	}{
		{`{"n":"t","v":1}`, "d", ReasonInvalidSenML, "payload is a JSON object, want a SenML pack"},
		{`x`, "d", ReasonInvalidJSON, ""},
		{`[{"n":"t","v":1}`, "d", ReasonInvalidJSON, "end of input"},
		{`[{"n":"t","v":1},]`, "d", ReasonInvalidJSON, ""},
		{`[{"n":"t","v":1}] x`, "d", ReasonInvalidJSON, "after top-level value"},
		{`[{"n":"t","v":1,}]`, "d", ReasonInvalidJSON, ""},
		{`[{"n":"t","v":01}]`, "d", ReasonInvalidJSON, ""},
		{`[{"n":5,"v":"x"`, "d", ReasonInvalidJSON, ""}, // syntax beats type
		{`[1]`, "d", ReasonInvalidSenML, "record 0 is a JSON number"},
		{`[{"n":5,"v":1}]`, "d", ReasonInvalidSenML, `field "n" is a JSON number, want a string`},
		{`[{"n":"t","v":"1"}]`, "d", ReasonInvalidSenML, `field "v" is a JSON string, want a number`},
		{`[{"n":"t","vb":1}]`, "d", ReasonInvalidSenML, "want a boolean"},
		{`[{"n":"t","v":1,"vs":"2"}]`, "d", ReasonInvalidSenML, "2 value fields"},
		{`[{"bver":11,"n":"t","v":1}]`, "d", ReasonInvalidSenML, "newer than SenML version 10"},
		{`[{"n":"t","v":1,"x_":1}]`, "d", ReasonInvalidSenML, "must be understood"},
		{`[{"n":"t","v":1e999}]`, "d", ReasonNonFinite, ""},
		{`[{"bv":1e308,"n":"t","v":1e308}]`, "d", ReasonNonFinite, ""},
		{`[{"n":"t","vs":"inf"}]`, "d", ReasonNonFinite, ""},
		{`[{"n":"t","t":-300000000,"v":1}]`, "d", ReasonBadTimestamp, "before 1970"},
		{`[{"n":"t","t":1e30,"v":1}]`, "d", ReasonBadTimestamp, "out of range"},
		{`[{"bt":9e9,"n":"t","t":9e9,"v":1}]`, "d", ReasonBadTimestamp, "out of range"},
		{`[{"v":1}]`, "", ReasonBadDevice, "no name"},
		{`[{"bn":"a\u0001b:","n":"t","v":1}]`, "", ReasonBadDevice, `device "a\x01b"`},
		{`[{"bn":"d:","n":"a\tb","v":1}]`, "", ReasonBadMetric, `metric "a\tb"`},
		{`[{"n":"d","v":1}]`, "", ReasonBadMetric, "no metric part"},
		{`[]`, "d", ReasonNoReadings, "no values in 0 records"},
		{`[{"bn":"d:"},{"n":"l","vd":"aGk"}]`, "", ReasonNoReadings, "(1 ignored)"},
	} {
		var d Decoder
		out, ignored, err := d.Decode(nil, S, []byte(tc.payload), tc.device, "", testRecv)
		if RejectReason(err) != tc.reason || err != nil && !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("Decode(%s): %v, want %s containing %q", tc.payload, err, tc.reason, tc.detail)
		}
		if out != nil || ignored != 0 || d.Restamped() != 0 {
			t.Errorf("Decode(%s) on error: out %v, ignored %d, restamped %d", tc.payload, out, ignored, d.Restamped())
		}
	}
	// LwM2M-style names work with the device from the topic.
	runDecodeCases(t, []decodeCase{
		{"lwm2m", S, `[{"bn":"/3303/0/","n":"5700","v":21.5}]`, "d", "", []buffer.Reading{rd("d", "5700", recvNS, 21.5)}, 0},
	})
}

func TestDecode_Influx(t *testing.T) {
	const L = FormatInflux
	runDecodeCases(t, []decodeCase{
		{"device tag", L, "weather,device=ws-1,site=roof temp=21.5,hum=40i 1763800000", "", "",
			[]buffer.Reading{rd("ws-1", "weather.temp", 1763800000e9, 21.5), rd("ws-1", "weather.hum", 1763800000e9, 40)}, 0},
		{"host tag", L, "cpu,host=pi4 usage_idle=97.5", "", "", []buffer.Reading{rd("pi4", "cpu.usage_idle", recvNS, 97.5)}, 0},
		{"device tag beats host", L, "cpu,device=d1,host=pi4 x=1\ncpu,host=pi4,device=d1 x=2", "", "",
			[]buffer.Reading{rd("d1", "cpu.x", recvNS, 1), rd("d1", "cpu.x", recvNS, 2)}, 0},
		{"topic device wins", L, "cpu,host=pi4 x=1", "d", "", []buffer.Reading{rd("d", "cpu.x", recvNS, 1)}, 0},
		{"milliseconds", L, "m f=1 1763800000123", "d", "", []buffer.Reading{rd("d", "m.f", 1763800000123e6, 1)}, 0},
		{"microseconds", L, "m f=1 1763800000123456", "d", "", []buffer.Reading{rd("d", "m.f", 1763800000123456e3, 1)}, 0},
		{"nanoseconds", L, "m f=1 1763800000123456789", "d", "", []buffer.Reading{rd("d", "m.f", 1763800000123456789, 1)}, 0},
		{"restamped", L, "m f=1 946684799", "d", "", []buffer.Reading{rd("d", "m.f", recvNS, 1)}, 0},
		{"crlf, blanks, comments, spaces", L, "\r\n  # c\r\nm  f=1,g=2i   1763800000  \r\n\t\n", "d", "",
			[]buffer.Reading{rd("d", "m.f", 1763800000e9, 1), rd("d", "m.g", 1763800000e9, 2)}, 0},
		{"integers at their limits", L, "m a=9223372036854775807i,b=-9223372036854775808i,c=18446744073709551615u,d=0u", "d", "",
			[]buffer.Reading{rd("d", "m.a", recvNS, 9223372036854775807), rd("d", "m.b", recvNS, -9223372036854775808),
				rd("d", "m.c", recvNS, 18446744073709551615), rd("d", "m.d", recvNS, 0)}, 0},
		{"strings", L, `m state="ON",label="a, b=c \"d\"",t="23.5",x="\\"`, "d", "",
			[]buffer.Reading{rd("d", "m.state", recvNS, 1), txt("d", "m.label", recvNS, `a, b=c "d"`), rd("d", "m.t", recvNS, 23.5), txt("d", "m.x", recvNS, `\`)}, 0},
		{"only missing", L, `m f="unavailable"`, "d", "", nil, 1},
	})
	for _, tc := range []struct {
		payload, device, reason, detail string
	}{
		{"m", "d", ReasonInvalidLine, "line 1: no field set"},
		{"m ", "d", ReasonInvalidLine, "no field set"},
		{"m,t=1", "d", ReasonInvalidLine, "no field set"},
		{",t=1 f=1", "d", ReasonInvalidLine, "empty measurement"},
		{"m,t f=1", "d", ReasonInvalidLine, `tag "t": want key=value`},
		{"m,t= f=1", "d", ReasonInvalidLine, "empty value"},
		{"m f", "d", ReasonInvalidLine, `field "f": want key=value`},
		{"m f=", "d", ReasonInvalidLine, "no value"},
		{"m =1", "d", ReasonInvalidLine, ""},
		{"m f=1,", "d", ReasonInvalidLine, ""},
		{`m f="x`, "d", ReasonInvalidLine, "unterminated string"},
		{`m f="x"y`, "d", ReasonInvalidLine, "after the value"},
		{"m f=abc", "d", ReasonInvalidLine, "want a number, a boolean or a double-quoted string"},
		{"m f=nan", "d", ReasonInvalidLine, ""},
		{"m f=ON", "d", ReasonInvalidLine, ""},
		{"m f=1.5i", "d", ReasonInvalidLine, "want an integer before i"},
		{"m f=-1u", "d", ReasonInvalidLine, "want an integer before u"},
		{"m f=9223372036854775808i", "d", ReasonInvalidLine, "out of range"},
		{"m f=18446744073709551616u", "d", ReasonInvalidLine, "out of range"},
		{"m f=1 12x", "d", ReasonInvalidLine, "want an integer"},
		{"m f=1 1 2", "d", ReasonInvalidLine, "after the timestamp"},
		{"m f=1\nm g", "d", ReasonInvalidLine, "line 2"},
		{"m,t=a b f=1", "d", ReasonInvalidLine, ""},
		{"m f=1e999", "d", ReasonNonFinite, ""},
		{`m f="-inf"`, "d", ReasonNonFinite, ""},
		{"m f=1 -5", "d", ReasonBadTimestamp, "negative"},
		{"m f=1 99999999999999999999", "d", ReasonBadTimestamp, "out of range"},
		{"m f=1", "", ReasonBadDevice, "no device or host tag"},
		{"m,device=a\x01b f=1", "", ReasonBadDevice, `device "a\x01b"`},
		{"m\x7fx f=1", "d", ReasonBadMetric, `metric "m\x7fx.f"`},
		{"# only a comment", "d", ReasonNoReadings, ""},
		{"m f=1\nm g=2 x\n", "d", ReasonInvalidLine, "line 2"}, // stored whole or not at all
		{"m\\ x f=1\nm g", "d", ReasonInvalidLine, ""},         // syntax beats a bad name
	} {
		var d Decoder
		out, ignored, err := d.Decode(nil, L, []byte(tc.payload), tc.device, "", testRecv)
		if RejectReason(err) != tc.reason || err != nil && !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("Decode(%q): %v, want %s containing %q", tc.payload, err, tc.reason, tc.detail)
		}
		if out != nil || ignored != 0 {
			t.Errorf("Decode(%q) on error: out %v, ignored %d", tc.payload, out, ignored)
		}
	}
}

func TestDecode_AutoDetects(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    Format
	}{
		{`{"a":1}`, FormatJSON},
		{` [{"a":1}]`, FormatJSON},
		{`[{"a":1,"n":"x"}]`, FormatSenML},
		{`[{"bn":"x:"}]`, FormatSenML},
		{`[{"v":1}]`, FormatJSON},
		{`[1]`, FormatJSON},
		{`[]`, FormatJSON},
		{`m f=1`, FormatInflux},
		{`# c` + "\n" + `m f=1`, FormatInflux},
		{`21.5`, FormatValue},
		{`ON`, FormatValue},
		{``, FormatValue},
		{`[{"a":[1,{"n":2}],"n":"x"}]`, FormatSenML},
		{`[{"a":1 "n":"x"}]`, FormatJSON},
	} {
		p := []byte(tc.payload)
		if got := detectFormat(p, skipSpace(p, 0)); got != tc.want {
			t.Errorf("detectFormat(%q) = %v, want %v", tc.payload, got, tc.want)
		}
	}
}

func TestDecode_FormatAllocs(t *testing.T) {
	for _, tc := range []struct {
		format  Format
		payload string
	}{
		{FormatSenML, `[{"bn":"urn:dev:ow:10e2073a01080063:","bt":1.320067464e+09,"n":"voltage","u":"V","v":120.1},{"n":"current","t":-5,"v":1.2}]`},
		{FormatInflux, "weather,device=ws-1 temp=21.5,hum=40i,state=\"ON\" 1763800000000000000\n"},
		{FormatJSON, `[{"device":"d","ts":1763800000,"t":"21.5"},{"device":"d","ts":1763800001,"t":21.6}]`},
	} {
		var d Decoder
		dst := make([]buffer.Reading, 0, 8)
		payload := []byte(tc.payload)
		allocs := testing.AllocsPerRun(1000, func() {
			if _, _, err := d.Decode(dst, tc.format, payload, "", "", testRecv); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("Decode(%v) allocates %v times per message, want at most 1", tc.format, allocs)
		}
	}
}

// fuzzFormat is the body of the fuzz targets of the formats: whatever the
// payload, Decode rejects it cleanly or returns valid readings, the same
// from a fresh Decoder, and auto agrees with format when it picks it.
func fuzzFormat(t *testing.T, format Format, payload []byte) {
	topics := []struct{ device, metric string }{{"", ""}, {"dev1", ""}, {"", "temp"}, {"dev1", "temp"}}
	var d Decoder
	for _, tp := range topics {
		dst := make([]buffer.Reading, 1, 4)
		out, ignored, err := d.Decode(dst, format, payload, tp.device, tp.metric, testRecv)
		restamped := d.Restamped()
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || len(out) != 1 || ignored != 0 || restamped != 0 {
				t.Fatalf("Decode(%v, %q): err %v, out %d, ignored %d", format, payload, err, len(out), ignored)
			}
		} else {
			if len(out) < 2 && ignored < 1 && len(d.Dropped()) == 0 || ignored < 0 || restamped > len(out)-1 {
				t.Fatalf("Decode(%v, %q): %d readings, ignored %d, restamped %d", format, payload, len(out)-1, ignored, restamped)
			}
			for _, r := range out[1:] {
				if math.IsInf(r.Value, 0) || math.IsNaN(r.Value) || encoding.CheckDevice(r.Device) != "" || encoding.CheckMetric(r.Metric) != "" || r.TS < 0 ||
					tp.device != "" && r.Device != tp.device || badText(r) {
					t.Fatalf("Decode(%v, %q): invalid reading %+v", format, payload, r)
				}
			}
			if format == FormatSenML && !json.Valid(payload) {
				t.Fatalf("Decode(%v, %q): accepted, json.Valid rejects it", format, payload)
			}
		}
		var fresh Decoder
		out2, ignored2, err2 := fresh.Decode(nil, format, payload, tp.device, tp.metric, testRecv)
		if fmt.Sprint(err) != fmt.Sprint(err2) || ignored != ignored2 || fmt.Sprint(out[1:]) != fmt.Sprint(out2) || restamped != fresh.Restamped() {
			t.Fatalf("Decode(%v, %q) not deterministic: %v %v / %v %v", format, payload, out[1:], err, out2, err2)
		}
		if detectFormat(payload, skipSpace(payload, 0)) == format {
			out3, ignored3, err3 := fresh.Decode(nil, FormatAuto, payload, tp.device, tp.metric, testRecv)
			if fmt.Sprint(err) != fmt.Sprint(err3) || ignored != ignored3 || fmt.Sprint(out[1:]) != fmt.Sprint(out3) {
				t.Fatalf("Decode(auto, %q) differs from %v: %v %v / %v %v", payload, format, out3, err3, out[1:], err)
			}
		}
	}
}

func FuzzDecodeSenML(f *testing.F) {
	for _, fx := range loadFixtures(f, FormatSenML) {
		f.Add(fx.Payload)
	}
	for _, s := range []string{`[{"bn":"d:","n":"mode","vs":"heat"},{"n":"s","vs":" ON "},{"n":"x","vs":"a\u0001"}]`, `[{"n":"l","vs":"` + strings.Repeat("x", 70) + `"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) { fuzzFormat(t, FormatSenML, payload) })
}

func FuzzDecodeInflux(f *testing.F) {
	for _, fx := range loadFixtures(f, FormatInflux) {
		f.Add(fx.Payload)
	}
	for _, s := range []string{`m,device=d state="heat",on="ON",e="" 1795341600`, "m s=\"a\tb\",t=\"" + strings.Repeat("x", 70) + `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) { fuzzFormat(t, FormatInflux, payload) })
}

// TestDecode_DevicesDoc checks the examples of docs/devices.md that are
// not fixtures.
func TestDecode_DevicesDoc(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano()
	runDecodeCases(t, []decodeCase{
		{"object", FormatJSON, `{"Time":"2026-11-22T10:00:00Z","temperature":"21.5","relay":"ON","co2":"unavailable","unit":"C"}`, "greenhouse-1", "",
			[]buffer.Reading{rd("greenhouse-1", "temperature", at, 21.5), rd("greenhouse-1", "relay", at, 1)}, 2},
		{"array", FormatJSON, `[{"device":"a","ts":1763800000,"t":21.5},{"device":"b","t":19}]`, "", "",
			[]buffer.Reading{rd("a", "t", time.Date(2025, 11, 22, 8, 26, 40, 0, time.UTC).UnixNano(), 21.5), rd("b", "t", recvNS, 19)}, 0},
		{"value", FormatValue, "ON", "boiler", "relay", []buffer.Reading{rd("boiler", "relay", recvNS, 1)}, 0},
		{"missing value", FormatValue, "unavailable", "boiler", "relay", nil, 1},
	})
}

func withUnit(r buffer.Reading, unit string) buffer.Reading {
	r.Unit = unit
	return r
}

// TestDecode_NamesAsSent reads names with spaces, '/', escapes and accents
// as the devices send them.
func TestDecode_NamesAsSent(t *testing.T) {
	for _, tc := range []struct {
		format         Format
		payload        string
		device, metric string
	}{
		{FormatSenML, `[{"bn":"a b:","n":"t","v":1}]`, "a b", "t"},
		{FormatSenML, `[{"bn":"/3303/0/","n":"5700","v":1}]`, "/3303/0", "5700"},
		{FormatSenML, `[{"bn":"d:","n":"a b","v":1}]`, "d", "a b"},
		{FormatInflux, `m,device=a\ b f=1`, "a b", "m.f"},
		{FormatInflux, `m\ x,device=d f=1`, "d", "m x.f"},
		{FormatInflux, `m\,x,device=a f=1`, "a", "m,x.f"},
		{FormatInflux, `m,device=a\=b f=1`, "a=b", "m.f"},
		{FormatInflux, `m\a,device=d f=1`, "d", `m\a.f`},
		{FormatInflux, `Temperatur,device=Küche Wert=21`, "Küche", "Temperatur.Wert"},
		{FormatJSON, `{"device":"kitchen/door","Außen temp":1}`, "kitchen/door", "Außen temp"},
	} {
		var d Decoder
		got, _, err := d.Decode(nil, tc.format, []byte(tc.payload), "", "", testRecv)
		if err != nil || len(got) != 1 || got[0].Device != tc.device || got[0].Metric != tc.metric {
			t.Errorf("Decode(%s) = %v, %v; want device %q metric %q", tc.payload, got, err, tc.device, tc.metric)
		}
	}
}
