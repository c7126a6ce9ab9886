package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
)

var testRecv = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const recvNS = 1795341600000000000 // testRecv.UnixNano()

func txt(device, metric string, ts int64, text string) buffer.Reading {
	return buffer.Reading{Device: device, Metric: metric, TS: ts, Text: text}
}

func rd(device, metric string, ts int64, v float64) buffer.Reading {
	return buffer.Reading{Device: device, Metric: metric, TS: ts, Value: v}
}

func TestRecvNS(t *testing.T) {
	if got := testRecv.UnixNano(); got != recvNS {
		t.Fatalf("testRecv.UnixNano() = %d, want %d", got, recvNS)
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []Format{FormatAuto, FormatJSON, FormatValue, FormatSenML, FormatInflux} {
		got, err := ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v, nil", f.String(), got, err, f)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || err.Error() != `unknown payload format "xml" (want auto, json, value, senml or influx)` {
		t.Errorf(`ParseFormat("xml") error = %v`, err)
	}
	if got := Format(7).String(); got != "Format(7)" {
		t.Errorf("Format(7).String() = %q", got)
	}
}

func TestRejectReason(t *testing.T) {
	re := &RejectError{Reason: ReasonInvalidJSON, Detail: "unexpected end of input at byte 17"}
	if got, want := re.Error(), "invalid_json: unexpected end of input at byte 17"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&RejectError{Reason: ReasonEmptyPayload}).Error(); got != "empty_payload" {
		t.Errorf("Error() without detail = %q", got)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{re, ReasonInvalidJSON},
		{fmt.Errorf("topic x: %w", re), ReasonInvalidJSON},
		{errors.New("boom"), ReasonInternal},
	} {
		if got := RejectReason(tc.err); got != tc.want {
			t.Errorf("RejectReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		s              string
		device, metric bool
	}{
		{"boiler-1", true, true},
		{"aa:bb:cc:dd", true, true},
		{"0x00158d0001a2b3c4", true, true},
		{"env.t_1", true, true},
		{"a b", true, true},
		{"kitchen/door", true, true},
		{"Küche Temperatur", true, true},
		{"温度", true, true},
		{"sensor.outside_temperature", true, true},
		{"%RH", true, true},
		{"", false, false},
		{".", false, true},
		{"..", false, true},
		{"a\x00b", false, false},
		{"a\tb", false, false},
		{"a\nb", false, false},
		{"a\x7fb", false, false},
		{"a\u0085b", false, false}, // C1 control
		{"a\u200bb", false, false}, // zero-width space
		{"\xff", false, false},
		{strings.Repeat("a", 64), true, true},
		{strings.Repeat("é", 32), true, true},
		{strings.Repeat("a", 65), false, true},
		{strings.Repeat("a", 128), false, true},
		{strings.Repeat("a", 129), false, false},
	} {
		device, metric := encoding.CheckDevice(tc.s) == "", encoding.CheckMetric(tc.s) == ""
		if device != tc.device || metric != tc.metric {
			t.Errorf("CheckDevice/CheckMetric(%q) accept %v/%v, want %v/%v", tc.s, device, metric, tc.device, tc.metric)
		}
	}
}

type decodeCase struct {
	name           string
	format         Format
	payload        string
	device, metric string
	want           []buffer.Reading
	ignored        int
}

func runDecodeCases(t *testing.T, cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			prefix := []buffer.Reading{rd("keep", "me", 1, 2)}
			got, ignored, err := d.Decode(prefix, tc.format, []byte(tc.payload), tc.device, tc.metric, testRecv)
			if err != nil {
				t.Fatalf("Decode(%q) error: %v", tc.payload, err)
			}
			if !reflect.DeepEqual(got[:1], prefix) {
				t.Errorf("Decode(%q) changed dst[0] to %+v", tc.payload, got[0])
			}
			if !reflect.DeepEqual(noWords(t, got[1:]), tc.want) && (len(got) > 1 || len(tc.want) > 0) {
				t.Errorf("Decode(%q)\n got %+v\nwant %+v", tc.payload, got[1:], tc.want)
			}
			if ignored != tc.ignored {
				t.Errorf("Decode(%q) ignored = %d, want %d", tc.payload, ignored, tc.ignored)
			}
		})
	}
}

func TestDecode_JSON(t *testing.T) {
	const J = FormatJSON
	deep := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	runDecodeCases(t, []decodeCase{
		{"flat", J, `{"temperature":21.5,"humidity":40.25}`, "dev1", "",
			[]buffer.Reading{rd("dev1", "temperature", recvNS, 21.5), rd("dev1", "humidity", recvNS, 40.25)}, 0},
		{"auto", FormatAuto, ` {"t":1}`, "dev1", "", []buffer.Reading{rd("dev1", "t", recvNS, 1)}, 0},
		{"nested", J, `{"env":{"t":1,"h":{"rel":2}},"x":3}`, "d", "",
			[]buffer.Reading{rd("d", "env.t", recvNS, 1), rd("d", "env.h.rel", recvNS, 2), rd("d", "x", recvNS, 3)}, 0},
		{"deepest allowed", J, deep, "d", "", []buffer.Reading{rd("d", strings.TrimSuffix(strings.Repeat("a.", MaxDepth), "."), recvNS, 1)}, 0},
		{"booleans", J, `{"on":true,"off":false}`, "d", "",
			[]buffer.Reading{rd("d", "on", recvNS, 1), rd("d", "off", recvNS, 0)}, 0},
		{"ignored fields counted", J, `{"t":1,"unit":"C","x":null,"arr":[1,[2,{"a":3}],"s",null,true]}`, "d", "",
			[]buffer.Reading{rd("d", "t", recvNS, 1)}, 3},
		{"ignored nested", J, `{"a":{"s":"x","n":1,"e":{}},"b":[]}`, "d", "", []buffer.Reading{txt("d", "a.s", recvNS, "x"), rd("d", "a.n", recvNS, 1)}, 1},
		{"numbers", J, `{"a":-1.5e3,"b":0,"c":-0,"d":1E-2,"e":0.1,"f":12345678901234567890123,"g":1e-400,"h":2.2250738585072011e-308}`, "d", "",
			[]buffer.Reading{rd("d", "a", recvNS, -1500), rd("d", "b", recvNS, 0), rd("d", "c", recvNS, math.Copysign(0, -1)),
				rd("d", "d", recvNS, 0.01), rd("d", "e", recvNS, 0.1), rd("d", "f", recvNS, 12345678901234567890123),
				rd("d", "g", recvNS, 0), rd("d", "h", recvNS, 2.2250738585072011e-308)}, 0},
		{"whitespace", J, " \t\r\n{ \"a\" :\n1 , \"b\":[ ] ,\"c\" : { \"d\" : 2 } }\n", "d", "",
			[]buffer.Reading{rd("d", "a", recvNS, 1), rd("d", "c.d", recvNS, 2)}, 1},
		{"escaped key", J, `{"t\u0065mp\u002Ex":1,"a\/b":"s"}`, "d", "", []buffer.Reading{rd("d", "temp.x", recvNS, 1), txt("d", "a/b", recvNS, "s")}, 0},
		{"odd keys of ignored fields", J, `{"friendly name":"x","\ud83d\ude00":null,"t":1}`, "d", "", []buffer.Reading{txt("d", "friendly name", recvNS, "x"), rd("d", "t", recvNS, 1)}, 1},
		{"name characters", J, `{"a:b-c_d.E9":1}`, "d", "", []buffer.Reading{rd("d", "a:b-c_d.E9", recvNS, 1)}, 0},
		{"duplicate keys", J, `{"a":1,"a":2}`, "d", "", []buffer.Reading{rd("d", "a", recvNS, 1), rd("d", "a", recvNS, 2)}, 0},
		{"device from payload", J, `{"t":1,"device":"boiler"}`, "", "", []buffer.Reading{rd("boiler", "t", recvNS, 1)}, 0},
		{"device from payload escaped", J, `{"device":"boi\u006cer","t":1}`, "", "", []buffer.Reading{rd("boiler", "t", recvNS, 1)}, 0},
		{"topic device wins", J, `{"device":"other","t":1}`, "dev1", "", []buffer.Reading{rd("dev1", "t", recvNS, 1)}, 1},
		{"topic device wins over non-string", J, `{"device":{"id":5},"t":1}`, "dev1", "", []buffer.Reading{rd("dev1", "t", recvNS, 1)}, 1},
		{"nested device is a field", J, `{"meta":{"device":"x","n":2}}`, "d", "", []buffer.Reading{txt("d", "meta.device", recvNS, "x"), rd("d", "meta.n", recvNS, 2)}, 0},
		{"value named by topic", J, `{"value":21.5,"unit":"C"}`, "d", "temp", []buffer.Reading{rd("d", "temp", recvNS, 21.5)}, 1},
		{"value without topic metric", J, `{"value":21.5}`, "d", "", []buffer.Reading{rd("d", "value", recvNS, 21.5)}, 0},
		{"value with other readings", J, `{"value":1,"other":2}`, "d", "temp",
			[]buffer.Reading{rd("d", "value", recvNS, 1), rd("d", "other", recvNS, 2)}, 0},
		{"nested value keeps its name", J, `{"a":{"value":1}}`, "d", "temp", []buffer.Reading{rd("d", "a.value", recvNS, 1)}, 0},
		{"field names win over topic metric", J, `{"temperature":1}`, "d", "temp", []buffer.Reading{rd("d", "temperature", recvNS, 1)}, 0},
		{"tasmota", J, `{"Time":"2026-11-22T11:00:00","AM2301":{"Temperature":21.3,"Humidity":54.1},"TempUnit":"C"}`, "tasmota_1", "",
			[]buffer.Reading{rd("tasmota_1", "AM2301.Temperature", recvNS+3600e9, 21.3), rd("tasmota_1", "AM2301.Humidity", recvNS+3600e9, 54.1), txt("tasmota_1", "TempUnit", recvNS+3600e9, "C")}, 0},
		{"zigbee2mqtt", J, `{"battery":100,"humidity":54.1,"linkquality":87,"temperature":21.3,"voltage":3015}`, "0x00158d0001a2b3c4", "",
			[]buffer.Reading{rd("0x00158d0001a2b3c4", "battery", recvNS, 100), rd("0x00158d0001a2b3c4", "humidity", recvNS, 54.1),
				rd("0x00158d0001a2b3c4", "linkquality", recvNS, 87), rd("0x00158d0001a2b3c4", "temperature", recvNS, 21.3),
				rd("0x00158d0001a2b3c4", "voltage", recvNS, 3015)}, 0},
	})
}

func TestDecode_Timestamps(t *testing.T) {
	const sec = int64(time.Second)
	for _, tc := range []struct {
		ts   string // JSON value of the field
		want int64
	}{
		{`1763800000`, 1763800000 * sec},
		{`1763800000.5`, 1763800000*sec + 5e8},
		{`1763800000.1234567899`, 1763800000*sec + 123456789}, // truncated
		{`1763800000123`, 1763800000123 * 1e6},
		{`1763800000123.4567`, 1763800000123*1e6 + 456700},
		{`1763800000123456`, 1763800000123456 * 1e3},
		{`1763800000123456.7`, 1763800000123456*1e3 + 700},
		{`1763800000123456789`, 1763800000123456789},
		{`1.7638e9`, 1763800000 * sec},
		{`1763800000123e-3`, 1763800000123 * 1e6},
		{`17638000001234567891E-10`, 1763800000*sec + 123456789},
		{`0`, 0},
		{`-0`, 0},
		{`0.000000001`, 1},
		{`1e11`, 1e17}, // milliseconds from 1e11
		{`1e14`, 1e17}, // microseconds from 1e14
		{`1e17`, 1e17}, // nanoseconds from 1e17
		{`9223372036`, 9223372036 * sec},
		{`9223372036854775807`, math.MaxInt64},
		{`"2026-11-22T10:00:00Z"`, recvNS},
		{`"2026-11-22T10:00:00.123Z"`, recvNS + 123e6},
		{`"2026-11-22T10:00:00.123456789Z"`, recvNS + 123456789},
		{`"2026-11-22T10:00:00.1234567891Z"`, recvNS + 123456789},
		{`"2026-11-22T11:00:00+01:00"`, recvNS},
		{`"2026-11-22T08:30:00-01:30"`, recvNS},
		{`"2026-11-22T11:00:00+0100"`, recvNS},
		{`"2026-11-22 10:00:00Z"`, recvNS},
		{`"2026-11-22t10:00:00z"`, recvNS},
		{`"2026-11-22T10:00:00"`, recvNS},
		{`"2026-11-22 10:00:00.5"`, recvNS + 5e8},
		{`"2026-11-22T10:00:00\u005A"`, recvNS},
		{`"2028-02-29T00:00:00Z"`, time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC).UnixNano()},
		{`"1970-01-01T00:00:00Z"`, 0},
		{`"2262-04-11T23:47:16.854775807Z"`, math.MaxInt64},
		{`"1763800000"`, 1763800000 * sec},
		{`"1763800000123.5"`, 1763800000123*1e6 + 5e5},
		{`"1999-12-31T23:59:59.999Z"`, 946684799999000000},
		{`"2000-01-01T00:00:00Z"`, 946684800 * sec},
		{`946684799`, 946684799 * sec},
	} {
		want, restamped := tc.want, 0
		if want < MinReadingTime { // a device clock never set
			want, restamped = recvNS, 1
		}
		for _, key := range []string{"ts", "time", "timestamp", "epoch", "TS", "Time", "TimeStamp", "EPOCH"} {
			payload := `{"` + key + `":` + tc.ts + `,"t":1}`
			var d Decoder
			got, _, err := d.Decode(nil, FormatJSON, []byte(payload), "d", "", testRecv)
			if err != nil {
				t.Errorf("Decode(%s): %v", payload, err)
				continue
			}
			if got[0].TS != want || d.Restamped() != restamped {
				t.Errorf("Decode(%s) TS = %d (%v), restamped %d; want %d (%v), %d", payload, got[0].TS, got[0].Time(), d.Restamped(), want, time.Unix(0, want).UTC(), restamped)
			}
		}
	}
	runDecodeCases(t, []decodeCase{
		{"epoch wins over ts, time and timestamp", FormatJSON, `{"timestamp":1763800003,"ts":1763800001,"Epoch":1763800004,"time":1763800002,"t":0}`, "d", "", []buffer.Reading{rd("d", "t", 1763800004e9, 0)}, 0},
		{"ts wins over time and timestamp", FormatJSON, `{"timestamp":1763800003,"ts":1763800001,"time":1763800002,"t":0}`, "d", "", []buffer.Reading{rd("d", "t", 1763800001e9, 0)}, 0},
		{"time wins over timestamp", FormatJSON, `{"time":1763800002,"timestamp":1763800003,"t":0}`, "d", "", []buffer.Reading{rd("d", "t", 1763800002e9, 0)}, 0},
		{"last duplicate wins", FormatJSON, `{"ts":1763800001,"Ts":1763800002,"t":0}`, "d", "", []buffer.Reading{rd("d", "t", 1763800002e9, 0)}, 0},
		{"nested ts is a reading", FormatJSON, `{"a":{"ts":5}}`, "d", "", []buffer.Reading{rd("d", "a.ts", recvNS, 5)}, 0},
		{"names match in any case", FormatJSON, `{"TS":1763800005,"t":5}`, "d", "", []buffer.Reading{rd("d", "t", 1763800005e9, 5)}, 0},
		{"never-set clock", FormatJSON, `{"ts":"1970-01-01T00:00:12Z","t":5,"u":6}`, "d", "", []buffer.Reading{rd("d", "t", recvNS, 5), rd("d", "u", recvNS, 6)}, 0},
		{"other time names are readings", FormatJSON, `{"date":1763800005,"t":5}`, "d", "", []buffer.Reading{rd("d", "date", recvNS, 1763800005), rd("d", "t", recvNS, 5)}, 0},
	})
}

func TestParseISOTime_MatchesTimePackage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	layouts := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02 15:04:05.999Z07:00", "2006-01-02T15:04:05-0700"}
	for range 20000 {
		sec := r.Int64N(9223372036)
		zone := time.FixedZone("", (r.IntN(48)-24)*1800)
		tm := time.Unix(sec, r.Int64N(1e9)).In(zone)
		s := tm.Format(layouts[r.IntN(len(layouts))])
		want, err := time.Parse(strings.Replace(time.RFC3339, "T", s[10:11], 1), s)
		if err != nil {
			want, err = time.Parse("2006-01-02T15:04:05.999999999-0700", s)
		}
		if err != nil {
			t.Fatalf("time.Parse(%q): %v", s, err)
		}
		got, prob := parseISOTime([]byte(s), nil)
		if prob != "" || got != want.UnixNano() {
			if want.UnixNano() < 0 && prob != "" {
				continue
			}
			t.Fatalf("parseISOTime(%q) = %d, %q; want %d", s, got, prob, want.UnixNano())
		}
	}
}

func TestDecode_EpochMatchesBigRat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return strings.TrimLeft(string(b), "0")
	}
	for range 50000 {
		num := digits(1 + r.IntN(22))
		if num == "" {
			num = "0"
		}
		if r.IntN(2) == 0 {
			num += "." + digits(1+r.IntN(25)) + "1"
		}
		if r.IntN(3) == 0 {
			num += fmt.Sprintf("e%d", r.IntN(40)-20)
		}
		want, ok := oracleTime(json.Number(num))
		if ok && want < MinReadingTime {
			want = recvNS
		}
		var d Decoder
		out, _, err := d.Decode(nil, FormatJSON, []byte(`{"ts":`+num+`,"a":1}`), "d", "", testRecv)
		if !ok {
			if RejectReason(err) != ReasonBadTimestamp {
				t.Fatalf("ts %s: err %v, want bad_timestamp", num, err)
			}
			continue
		}
		if err != nil || out[0].TS != want {
			t.Fatalf("ts %s: got %v, %v; want %d", num, out, err, want)
		}
	}
}

func TestDecode_Value(t *testing.T) {
	var cases []decodeCase
	for _, f := range []Format{FormatAuto, FormatValue} {
		for _, tc := range []struct {
			payload string
			want    float64
		}{
			{"21.5", 21.5}, {" 21.5\r\n", 21.5}, {"-3", -3}, {"+1e3", 1000}, {".5", 0.5}, {"5.", 5}, {"007", 7},
			{"0.1", 0.1}, {"1E-2", 0.01}, {"123456789012345678901234567890", 123456789012345678901234567890},
			{"true", 1}, {"false", 0}, {"\ttrue ", 1},
		} {
			cases = append(cases, decodeCase{f.String() + " " + tc.payload, f, tc.payload, "dev1", "temp",
				[]buffer.Reading{rd("dev1", "temp", recvNS, tc.want)}, 0})
		}
	}
	runDecodeCases(t, cases)
}

func TestDecode_NumbersMatchStrconv(t *testing.T) {
	inputs := []string{"0", "-0", "1", "0.1", "0.3", "1e23", "8.98846567431158e307", "1.7976931348623157e308",
		"4.9e-324", "2.2250738585072011e-308", "9007199254740993", "9007199254740992", "123456789012345678",
		"1234567890123456789", "12345678901234567890", "0.000000000000000000000000000001", "1e22", "1e-22",
		"9999999999999999e22", "1.000000000000000000000000001", "100000000000000000000000", "3.14159265358979323846"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		if r.IntN(5) == 0 {
			b.WriteByte('0')
		} else {
			b.WriteString(strconv.FormatUint(r.Uint64()>>r.IntN(64), 10))
		}
		if r.IntN(2) == 0 {
			b.WriteString("." + strconv.FormatUint(r.Uint64()>>r.IntN(64), 10))
		}
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, "e%d", r.IntN(60)-30)
		}
		inputs = append(inputs, b.String())
	}
	for _, s := range inputs {
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("bad test input %q: %v", s, err)
		}
		n, ok := scanNumber([]byte(s), 0, true)
		if !ok || n.end != len(s) {
			t.Fatalf("scanNumber(%q) = %+v, %v", s, n, ok)
		}
		if got := n.float([]byte(s), 0); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("float(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestDecode_Reject(t *testing.T) {
	long := strings.Repeat("a", 100)
	for _, tc := range []struct {
		format         Format
		payload        string
		device, metric string
		max            int
		reason, detail string // detail: substring of the error message
	}{
		{FormatJSON, `{"a":1}`, "d", "", 6, ReasonPayloadTooLarge, "7 bytes, limit 6"},
		{FormatValue, "1234567", "d", "m", 6, ReasonPayloadTooLarge, ""},
		{FormatJSON, "", "d", "m", 0, ReasonEmptyPayload, ""},
		{FormatJSON, " \r\n\t", "d", "m", 0, ReasonEmptyPayload, ""},
		{FormatSenML, " ", "d", "m", 0, ReasonEmptyPayload, ""},
		{FormatInflux, "\n", "d", "m", 0, ReasonEmptyPayload, ""},

		{FormatJSON, `{"temperature":21`, "d", "", 0, ReasonInvalidJSON, "invalid_json: unexpected end of input at byte 17"},
		{FormatJSON, `{"a":1`, "d", "", 0, ReasonInvalidJSON, "end of input"},
		{FormatJSON, `{"a":1}x`, "d", "", 0, ReasonInvalidJSON, "invalid character 'x' after top-level object at byte 7"},
		{FormatJSON, `{"a":1}{}`, "d", "", 0, ReasonInvalidJSON, "after top-level object"},
		{FormatJSON, `{"a":01}`, "d", "", 0, ReasonInvalidJSON, "invalid character '1' in numeric literal at byte 6"},
		{FormatJSON, `{"a":-}`, "d", "", 0, ReasonInvalidJSON, "numeric literal"},
		{FormatJSON, `{"a":1.}`, "d", "", 0, ReasonInvalidJSON, "numeric literal"},
		{FormatJSON, `{"a":.5}`, "d", "", 0, ReasonInvalidJSON, "looking for beginning of value"},
		{FormatJSON, `{"a":1e}`, "d", "", 0, ReasonInvalidJSON, "numeric literal"},
		{FormatJSON, `{"a":+1}`, "d", "", 0, ReasonInvalidJSON, "looking for beginning of value"},
		{FormatJSON, `{"a":NaN}`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `{"a":Infinity}`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `{"a":tru}`, "d", "", 0, ReasonInvalidJSON, "in literal true"},
		{FormatJSON, `{"a":"\q"}`, "d", "", 0, ReasonInvalidJSON, "in string escape code"},
		{FormatJSON, `{"a":"\u12x4"}`, "d", "", 0, ReasonInvalidJSON, `in \u hexadecimal character escape`},
		{FormatJSON, `{"a":"x`, "d", "", 0, ReasonInvalidJSON, "end of input"},
		{FormatJSON, "{\"a\":\"x\ny\"}", "d", "", 0, ReasonInvalidJSON, "invalid character byte 0x0a in string literal at byte 7"},
		{FormatJSON, `{"a":1,}`, "d", "", 0, ReasonInvalidJSON, "looking for beginning of object key string"},
		{FormatJSON, `{"a" 1}`, "d", "", 0, ReasonInvalidJSON, "after object key"},
		{FormatJSON, `{"a":1 "b":2}`, "d", "", 0, ReasonInvalidJSON, "after object key:value pair"},
		{FormatJSON, `{"a":[1,]}`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `{"a":[1 2]}`, "d", "", 0, ReasonInvalidJSON, "after array element"},
		{FormatJSON, `{'a':1}`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, "\ufeff{\"a\":1}", "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `[1,2]`, "d", "", 0, ReasonInvalidJSON, "array element 0 is a JSON number, want an object"},
		{FormatJSON, `[{"a":1},[]]`, "d", "", 0, ReasonInvalidJSON, "array element 1 is a JSON array, want an object"},
		{FormatJSON, `[{"a":1}`, "d", "", 0, ReasonInvalidJSON, "end of input"},
		{FormatJSON, `[{"a":1},]`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `[{"a":1}]]`, "d", "", 0, ReasonInvalidJSON, "after top-level array"},
		{FormatJSON, `[{"a":1},{"b":2}`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `[{"a":1},{"b":}]`, "d", "", 0, ReasonInvalidJSON, ""},
		{FormatJSON, `"21.5"`, "d", "", 0, ReasonInvalidJSON, "payload is a JSON string, want a JSON object or array of objects"},
		{FormatJSON, `21.5`, "d", "temp", 0, ReasonInvalidJSON, "payload is a JSON number"},
		{FormatJSON, `{"a":"bad ts too","ts":"x","b":1}}`, "d", "", 0, ReasonInvalidJSON, ""}, // syntax beats bad_timestamp
		{FormatAuto, `{"a":1,}`, "d", "", 0, ReasonInvalidJSON, ""},

		{FormatAuto, `[21.5]`, "d", "m", 0, ReasonInvalidJSON, "array element 0 is a JSON number"},
		{FormatValue, strings.Repeat("a", 65), "d", "m", 0, ReasonTextTooLong, "text of 65 bytes, limit 64"},
		{FormatAuto, strings.Repeat("é", 33) + "\n", "d", "m", 0, ReasonTextTooLong, "text of 66 bytes, limit 64"},
		{FormatValue, "a\x01b", "d", "m", 0, ReasonInvalidText, "control character byte 0x01"},
		{FormatValue, "a\x7fb", "d", "m", 0, ReasonInvalidText, "control character"},
		{FormatValue, "a\u0085b", "d", "m", 0, ReasonInvalidText, "C1 control character"},
		{FormatValue, "\xff", "d", "m", 0, ReasonInvalidText, "not valid UTF-8"},
		{FormatAuto, "h\xc3", "d", "m", 0, ReasonInvalidText, "not valid UTF-8"},
		{FormatAuto, "heat", "d", "", 0, ReasonNoMetric, ""},

		{FormatJSON, strings.Repeat(`{"a":`, 17) + "1" + strings.Repeat("}", 17), "d", "", 0, ReasonTooDeep, "nested deeper than 16 levels"},
		{FormatJSON, `{"a":` + strings.Repeat("[", 16) + strings.Repeat("]", 16) + "}", "d", "", 0, ReasonTooDeep, ""},
		{FormatJSON, `{"x":1,"a":` + strings.Repeat("[", 100000), "d", "", 0, ReasonTooDeep, ""},

		{FormatJSON, `{"a":1e999}`, "d", "", 0, ReasonNonFinite, `metric "a": "1e999" is not a finite float64`},
		{FormatJSON, `{"a":{"b":-1e400}}`, "d", "", 0, ReasonNonFinite, ""},
		{FormatValue, "1e999", "d", "m", 0, ReasonNonFinite, ""},
		{FormatAuto, "Inf", "d", "m", 0, ReasonNonFinite, ""},
		{FormatJSON, `{"a":"-Infinity"}`, "d", "", 0, ReasonNonFinite, ""},
		{FormatJSON, `{"a":"1e400"}`, "d", "", 0, ReasonNonFinite, ""},
		{FormatValue, "-inf", "d", "m", 0, ReasonNonFinite, ""},
		{FormatValue, "+Infinity", "d", "m", 0, ReasonNonFinite, ""},

		{FormatJSON, `{"ts":"yesterday","a":1}`, "d", "", 0, ReasonBadTimestamp, `field "ts" = "yesterday": want an RFC 3339 time`},
		{FormatJSON, `{"ts":-5,"a":1}`, "d", "", 0, ReasonBadTimestamp, "negative epoch time"},
		{FormatJSON, `{"time":null,"a":1}`, "d", "", 0, ReasonBadTimestamp, `field "time" = "null"`},
		{FormatJSON, `{"timestamp":true,"a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":{"s":1},"a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":[1],"a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":99999999999,"a":1}`, "d", "", 0, ReasonBadTimestamp, "out of range"},
		{FormatJSON, `{"ts":9223372037,"a":1}`, "d", "", 0, ReasonBadTimestamp, "out of range"},
		{FormatJSON, `{"ts":9223372036854775808,"a":1}`, "d", "", 0, ReasonBadTimestamp, "out of range"},
		{FormatJSON, `{"ts":1e30,"a":1}`, "d", "", 0, ReasonBadTimestamp, "out of range"},
		{FormatJSON, `{"ts":"1969-12-31T23:59:59Z","a":1}`, "d", "", 0, ReasonBadTimestamp, "before 1970"},
		{FormatJSON, `{"ts":"1970-01-01T00:30:00+01:00","a":1}`, "d", "", 0, ReasonBadTimestamp, "before 1970"},
		{FormatJSON, `{"ts":"2262-04-11T23:47:16.854775808Z","a":1}`, "d", "", 0, ReasonBadTimestamp, "after 2262"},
		{FormatJSON, `{"ts":"2026-02-29T00:00:00Z","a":1}`, "d", "", 0, ReasonBadTimestamp, "out of range"},
		{FormatJSON, `{"ts":"2026-11-22T24:00:00Z","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"2026-11-22T10:00:60Z","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"2026-11-22T10:00:00+24:00","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"2026-11-22T10:00Z","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"2026-11-22T10:00:00.Z","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"2026-11-22T10:00:00+01","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"2026-11-22","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"-1763800000","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":"","a":1}`, "d", "", 0, ReasonBadTimestamp, ""},
		{FormatJSON, `{"ts":1,"time":"bad","a":1}`, "d", "", 0, ReasonBadTimestamp, `field "time"`},

		{FormatJSON, `{"a":1}`, "a\tb", "", 0, ReasonBadDevice, `device "a\tb" from topic: unprintable character '\t' at offset 1`},
		{FormatValue, "1", "a\x7fb", "m", 0, ReasonBadDevice, ""},
		{FormatJSON, `{"a":1}`, strings.Repeat("d", 65), "", 0, ReasonBadDevice, "longer than 64 bytes"},
		{FormatJSON, `{"a":1,"device":"a\u0000b"}`, "", "", 0, ReasonBadDevice, `device "a\x00b": unprintable character '\x00'`},
		{FormatJSON, `{"a":1,"device":""}`, "", "", 0, ReasonBadDevice, `device "": empty`},
		{FormatJSON, `{"a":1}`, "..", "", 0, ReasonBadDevice, `device ".." from topic: a path step, not a name`},
		{FormatValue, "1", ".", "m", 0, ReasonBadDevice, "a path step"},
		{FormatJSON, `{"a":1,"device":"."}`, "", "", 0, ReasonBadDevice, `device ".": a path step, not a name`},
		{FormatJSON, `{"a":1,"device":7}`, "", "", 0, ReasonBadDevice, `field "device": want a string`},
		{FormatJSON, `{"a":1}`, "", "", 0, ReasonBadDevice, `no device: topic has no {device} and payload no "device" field`},
		{FormatValue, "1", "", "m", 0, ReasonBadDevice, "no device: a plain value needs {device} in the topic"},

		{FormatJSON, `{"a\nb":1}`, "d", "", 0, ReasonBadMetric, `metric "a\nb": unprintable character '\n' at offset 1`},
		{FormatJSON, "{\"temp\xc3\":1}", "d", "", 0, ReasonBadMetric, "not valid UTF-8 at offset 4"},
		{FormatJSON, `{"\u200b":1}`, "d", "", 0, ReasonBadMetric, ""},
		{FormatJSON, `{"a\u0000":1}`, "d", "", 0, ReasonBadMetric, ""},
		{FormatJSON, `{"":1}`, "d", "", 0, ReasonBadMetric, `metric "": empty key`},
		{FormatJSON, `{"":{"a":1}}`, "d", "", 0, ReasonBadMetric, `metric ".a": empty key`},
		{FormatJSON, `{"a":{"":1}}`, "d", "", 0, ReasonBadMetric, ""},
		{FormatJSON, `{"` + long + `":{"` + long + `":1}}`, "d", "", 0, ReasonBadMetric, "longer than 128 bytes"},
		{FormatValue, "1", "d", "te\x01mp", 0, ReasonBadMetric, `metric "te\x01mp" from topic`},
		{FormatJSON, `{"value":1}`, "d", "te\x01mp", 0, ReasonBadMetric, ""},
		{FormatJSON, `{"a":1,"b\u0007c":1e999}`, "d", "", 0, ReasonBadMetric, ""}, // first problem wins

		{FormatValue, "21.5", "d", "", 0, ReasonNoMetric, "a plain value needs {metric} in the topic"},
		{FormatAuto, "true", "d", "", 0, ReasonNoMetric, ""},

		{FormatJSON, `{}`, "d", "", 0, ReasonNoReadings, "no values (0 ignored)"},
		{FormatJSON, `[]`, "d", "", 0, ReasonNoReadings, "no values (0 ignored)"},
		{FormatJSON, `[{},{"unit":"C"}]`, "d", "", 0, ReasonNoReadings, "no values (1 ignored)"},
		{FormatJSON, `{"a":[],"unit":"C","c":[1]}`, "d", "", 0, ReasonNoReadings, "(3 ignored)"},
		{FormatJSON, `{"ts":1763800000,"device":"x"}`, "", "", 0, ReasonNoReadings, ""},
		{FormatJSON, `{"a":{"b":{}}}`, "d", "", 0, ReasonNoReadings, ""},
	} {
		d := Decoder{MaxPayload: tc.max}
		dst := make([]buffer.Reading, 1, 8)
		dst[0] = rd("keep", "me", 1, 2)
		out, ignored, err := d.Decode(dst, tc.format, []byte(tc.payload), tc.device, tc.metric, testRecv)
		if got := RejectReason(err); got != tc.reason {
			t.Errorf("Decode(%v, %.60q, %q, %q) reason = %q (%v), want %q", tc.format, tc.payload, tc.device, tc.metric, got, err, tc.reason)
			continue
		}
		if !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("Decode(%v, %.60q) error = %q, want it to contain %q", tc.format, tc.payload, err, tc.detail)
		}
		if len(out) != 1 || &out[0] != &dst[0] || out[0] != dst[0] || ignored != 0 {
			t.Errorf("Decode(%v, %.60q) on error returned out=%+v ignored=%d, want dst unchanged and 0", tc.format, tc.payload, out, ignored)
		}
	}
}

func TestDecode_UnknownFormat(t *testing.T) {
	var d Decoder
	_, _, err := d.Decode(nil, Format(9), []byte("1"), "d", "m", testRecv)
	if RejectReason(err) != ReasonInternal {
		t.Errorf("Decode with Format(9): err = %v, want a non-reject error", err)
	}
}

// TestDecode_ValidityMatchesEncodingJSON checks that, for objects, the
// scanner finds a syntax error exactly when json.Valid does.
func TestDecode_ValidityMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		`{}`, ` {} `, `{"a":1}`, `{"a":1}x`, `{"a":1}}`, `{"a":1} {}`, `{"a":01}`, `{"a":-01}`, `{"a":-0}`, `{"a":0.0e+0}`,
		`{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":1e+}`, `{"a":1E-5}`, `{"a":+1}`, `{"a":0x1}`, `{"a":1_0}`,
		`{"a":Infinity}`, `{"a":NaN}`, `{"a":tru}`, `{"a":True}`, `{"a":nul}`, `{"a":null}`, `{"a":falsey}`,
		`{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, `{"a":"\x"}`, `{"a":"\'"}`, `{"a":"\/"}`,
		"{\"a\":\"\x01\"}", "{\"a\":\"\t\"}", "{\"a\":\"\x7f\"}", "{\"a\":\"\xff\xfe\"}", "{\"\xff\":1}", "{\"a\":\"é\"}",
		`{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a"::1}`, `{"a":1 "b":2}`, `{a:1}`, `{'a':1}`, `{"a":[1,[2,[3]],{"b":null}]}`,
		`{"a":[1,]}`, `{"a":[,1]}`, `{"a":[}`, `{"a":]}`, `{"a":{"b":}}`, `{"a":{}}`, `{"a":[]}`, `{"a":[[]]}`, `{"a":"x"`,
		"{\"a\":1}\x00", "\x00{\"a\":1}", "{\"a\":1,\v\"b\":2}", "{\"a\":1,\f\"b\":2}", "{\r\n\t \"a\"\r\n:\t1}", "\ufeff{}",
		`{"a":1`, `{"a":`, `{"a"`, `{"`, `{`, `{"a":"\`, `{"a":"\u`, `{"a":1e999}`, `{"a":123456789012345678901234567890}`,
		`{"ts":"x","device":5}`, `{"a":"\"\\\/\b\f\n\r\t\u0041"}`, `{"a":{"b":{"c":[true,false,null,"x",-1.5e-3]}}}`,
	}
	for _, in := range inputs {
		var d Decoder
		_, _, err := d.Decode(nil, FormatJSON, []byte(in), "d", "", testRecv)
		ours := RejectReason(err) != ReasonInvalidJSON
		if want := json.Valid([]byte(in)); ours != want {
			t.Errorf("%q: scanner valid = %v (err %v), json.Valid = %v", in, ours, err, want)
		}
	}
}

func TestDecode_KeyUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, key := range []string{`a\u0062c`, `\ud83d\ude00`, `\ud83d`, `\ude00\ud83d`, `\ud83dx`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`,
		`\"\\\/\b\f\n\r\t`, `\u00e9\u20AC`} {
		var want map[string]int
		if err := json.Unmarshal([]byte(`{"`+key+`":1}`), &want); err != nil {
			t.Fatal(err)
		}
		var got []byte
		got = unescape(got, []byte(key))
		if _, ok := want[string(got)]; !ok {
			t.Errorf("unescape(%q) = %q, want one of %q", key, got, reflect.ValueOf(want).MapKeys())
		}
	}
}

func TestDecode_Allocs(t *testing.T) {
	var d Decoder
	payload := []byte(`{"ts":1763800000123,"temperature":21.5,"humidity":40.25}`)
	dst := make([]buffer.Reading, 0, 8)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, _, err := d.Decode(dst, FormatJSON, payload, "dev1", "", testRecv); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Decode allocates %v times per message, want at most 1", allocs)
	}
}

func TestDecoder_InternCacheIsBounded(t *testing.T) {
	var d Decoder
	for i := range 3 * maxInterned {
		payload := []byte(`{"m` + strconv.Itoa(i) + `":1}`)
		out, _, err := d.Decode(nil, FormatJSON, payload, "d", "", testRecv)
		if err != nil || out[0].Metric != "m"+strconv.Itoa(i) {
			t.Fatalf("Decode(%s) = %+v, %v", payload, out, err)
		}
		if len(d.names) > maxInterned {
			t.Fatalf("name cache holds %d names, limit %d", len(d.names), maxInterned)
		}
	}
}

func BenchmarkDecode_JSON(b *testing.B) {
	var d Decoder
	payload := []byte(`{"ts":1763800000123,"temperature":21.5,"humidity":40.25}`)
	dst := make([]buffer.Reading, 0, 8)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, _, err := d.Decode(dst, FormatJSON, payload, "dev1", "", testRecv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode_JSONNested(b *testing.B) {
	var d Decoder
	payload := []byte(`{"Time":"2026-11-22T11:00:00","AM2301":{"Temperature":21.3,"Humidity":54.1,"DewPoint":11.7},"TempUnit":"C"}`)
	dst := make([]buffer.Reading, 0, 8)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, _, err := d.Decode(dst, FormatAuto, payload, "tasmota_1", "", testRecv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode_Value(b *testing.B) {
	var d Decoder
	payload := []byte("21.5")
	dst := make([]buffer.Reading, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.Decode(dst, FormatAuto, payload, "dev1", "temperature", testRecv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode_EncodingJSONBaseline is for comparison only: the same
// message through encoding/json into a map.
func BenchmarkDecode_EncodingJSONBaseline(b *testing.B) {
	payload := []byte(`{"ts":1763800000123,"temperature":21.5,"humidity":40.25}`)
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// oracleReading is what encoding/json makes of a payload under the rules
// of Decode, for comparison.
type oracleReading struct {
	metric string
	value  float64
	text   string
}

// oracleTextReason is checkText written another way: the reason a text
// (trimmed) cannot be a reading's, or "".
func oracleTextReason(s string) string {
	switch {
	case len(s) > encoding.MaxText:
		return ReasonTextTooLong
	case !utf8.ValidString(s):
		return ReasonInvalidText
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return ReasonInvalidText
		}
	}
	return ""
}

// oracleDecode walks payload with encoding/json's tokenizer, applying the
// naming rules of Decode; it reports the readings, the ignored count and
// the raw timestamp field values by name.
func oracleDecode(t *testing.T, payload []byte, topicDevice bool) ([]oracleReading, int, int, map[string]any) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	tok := func() json.Token {
		tk, err := dec.Token()
		if err != nil {
			t.Fatalf("oracle: %v", err)
		}
		return tk
	}
	skip := func(first json.Token) {
		depth := 0
		for tk := first; ; tk = tok() {
			switch tk {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				return
			}
		}
	}
	var (
		out     []oracleReading
		ignored int
		dropped int
		special = map[string]any{}
		walk    func(prefix string, depth int)
	)
	walk = func(prefix string, depth int) {
		for dec.More() {
			key := tok().(string)
			name := key
			if depth > 1 {
				name = prefix + "." + key
			}
			v := tok()
			if lk := asciiLowerString(key); depth == 1 && (lk == "ts" || lk == "time" || lk == "timestamp" || lk == "epoch" || key == "device") {
				if key != "device" {
					key = lk
				}
				special[key] = v
				if key == "device" && topicDevice {
					ignored++
				}
				skip(v)
				continue
			}
			switch v := v.(type) {
			case json.Delim:
				if v == '{' {
					walk(name, depth+1)
					tok()
				} else {
					ignored++
					skip(v)
				}
			case string:
				switch f, kind := oracleText(v); {
				case kind == textNumber:
					out = append(out, oracleReading{name, f, ""})
				case kind == textOther && key != "unit":
					text := strings.Trim(v, " \t\r\n")
					if oracleTextReason(text) != "" {
						dropped++
					} else {
						out = append(out, oracleReading{name, 0, text})
					}
				default:
					ignored++
				}
			case nil:
				ignored++
			case bool:
				out = append(out, oracleReading{name, map[bool]float64{false: 0, true: 1}[v], ""})
			case json.Number:
				f, _ := strconv.ParseFloat(string(v), 64)
				out = append(out, oracleReading{name, f, ""})
			}
		}
	}
	if tok() != json.Delim('{') {
		t.Fatal("oracle: not an object")
	}
	walk("", 1)
	return out, ignored, dropped, special
}

// numberRE is the syntax of numbers in text (see parseText).
var numberRE = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// oracleText is parseText written another way, with strconv and a regexp.
func oracleText(s string) (float64, textKind) {
	s = asciiLowerString(strings.Trim(s, " \t\r\n"))
	if numberRE.MatchString(s) {
		f, _ := strconv.ParseFloat(s, 64)
		if math.IsInf(f, 0) {
			return 0, textNonFinite
		}
		return f, textNumber
	}
	switch strings.TrimLeft(s, "+-") {
	case "inf", "infinity":
		if len(s) <= len("infinity")+1 {
			return 0, textNonFinite
		}
	case "nan":
		if len(s) <= len("nan")+1 {
			return 0, textMissing
		}
	}
	switch s {
	case "true", "on", "open":
		return 1, textNumber
	case "false", "off", "closed":
		return 0, textNumber
	case "", "none", "null", "unavailable", "unknown":
		return 0, textMissing
	}
	return 0, textOther
}

// asciiLowerString lowers ASCII letters only.
func asciiLowerString(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

// oracleTime computes the nanoseconds of an epoch-number timestamp exactly,
// with big.Rat; ok is false for other values and huge exponents.
func oracleTime(v any) (int64, bool) {
	num, isNum := v.(json.Number)
	if !isNum {
		return 0, false
	}
	s := string(num)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(s[i+1:]); err != nil || e > 100 || e < -100 {
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, false
	}
	floor := func(r *big.Rat) *big.Int { return new(big.Int).Div(r.Num(), r.Denom()) } // Euclidean: floor for r >= 0
	scale := int64(1e9)
	switch ip := floor(r); {
	case ip.Cmp(big.NewInt(1e17)) >= 0:
		scale = 1
	case ip.Cmp(big.NewInt(1e14)) >= 0:
		scale = 1e3
	case ip.Cmp(big.NewInt(1e11)) >= 0:
		scale = 1e6
	}
	ns := floor(new(big.Rat).Mul(r, new(big.Rat).SetInt64(scale)))
	return ns.Int64(), ns.IsInt64()
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"ts":1763800000123,"temperature":21.5,"humidity":40.25}`,
		`{"battery":100,"humidity":54.1,"linkquality":87,"temperature":21.3,"voltage":3015}`,
		`{"Time":"2026-11-22T11:00:00","AM2301":{"Temperature":21.3,"Humidity":54.1},"TempUnit":"C"}`,
		`{"id":0,"source":"timer","output":true,"apower":12.3,"aenergy":{"total":1234.5,"by_minute":[1.2,3.4],"minute_ts":1763800000}}`,
		`{"device":"boiler","time":"2026-11-22 10:00:00.5+01:00","value":1e3,"x":null}`,
		`{"value":21.5,"unit":"C","ts":"2026-11-22T10:00:00Z"}`,
		"21.5", " -3e2\n", "true", "nan", `{"a":"\ud83d\ude00","\u0074":1}`, `{"a":1e999}`, `{"a":[[{"b":1}]],"c":01}`,
		`{"action":"single","battery":91,"last_seen":"2026-11-22T10:00:00Z"}`, `{"value":"heat"}`, `{"a":"x\u0001","b":" ON "}`,
		"heat", " not_home\n", "a\xffb", `{"s":"` + strings.Repeat("é", 33) + `"}`,
	} {
		f.Add([]byte(s))
	}
	topics := []struct{ device, metric string }{{"", ""}, {"dev1", ""}, {"", "temp"}, {"dev1", "temp"}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d Decoder
		for _, format := range []Format{FormatAuto, FormatJSON, FormatValue} {
			for _, tp := range topics {
				dst := make([]buffer.Reading, 1, 4)
				out, ignored, err := d.Decode(dst, format, payload, tp.device, tp.metric, testRecv)
				if err != nil {
					var re *RejectError
					if !errors.As(err, &re) || len(out) != 1 || ignored != 0 {
						t.Fatalf("Decode(%v, %q): err %v, out %d, ignored %d", format, payload, err, len(out), ignored)
					}
				} else {
					if len(out) < 2 && ignored < 1 && len(d.Dropped()) == 0 || ignored < 0 {
						t.Fatalf("Decode(%v, %q): %d readings, ignored %d", format, payload, len(out)-1, ignored)
					}
					for _, r := range out[1:] {
						if math.IsInf(r.Value, 0) || math.IsNaN(r.Value) || encoding.CheckDevice(r.Device) != "" || encoding.CheckMetric(r.Metric) != "" || r.TS < 0 || badText(r) {
							t.Fatalf("Decode(%v, %q): invalid reading %+v", format, payload, r)
						}
					}
				}
				var fresh Decoder
				out2, ignored2, err2 := fresh.Decode(nil, format, payload, tp.device, tp.metric, testRecv)
				if fmt.Sprint(err) != fmt.Sprint(err2) || ignored != ignored2 || fmt.Sprint(out[1:]) != fmt.Sprint(out2) {
					t.Fatalf("Decode(%v, %q) not deterministic: %v %v / %v %v", format, payload, out[1:], err, out2, err2)
				}
			}
		}

		// Cross-check with encoding/json.
		out, ignored, err := d.Decode(nil, FormatJSON, payload, "dev1", "temp", testRecv)
		reason := RejectReason(err)
		valid := json.Valid(payload)
		start := skipSpace(payload, 0)
		isObject := start < len(payload) && payload[start] == '{'
		if err == nil && !valid {
			t.Fatalf("accepted %q, which json.Valid rejects", payload)
		}
		if isObject && reason != ReasonTooDeep && (reason == ReasonInvalidJSON) == valid {
			t.Fatalf("%q: reason %q (%v), json.Valid = %v", payload, reason, err, valid)
		}
		if err == nil && isObject && utf8.Valid(payload) { // encoding/json replaces what is not UTF-8
			want, wantIgnored, wantDropped, special := oracleDecode(t, payload, true)
			numbers, at := 0, -1
			for i, r := range want {
				if r.text == "" {
					numbers, at = numbers+1, i
				}
			}
			if numbers == 1 && want[at].metric == "value" {
				want[at].metric = "temp"
			} else if numbers == 0 && len(want) == 1 && want[0].metric == "value" {
				want[0].metric = "temp"
			}
			got := make([]oracleReading, len(out))
			for i, r := range out {
				got[i] = oracleReading{r.Metric, r.Value, r.Text}
			}
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) || ignored != wantIgnored || len(d.Dropped()) != wantDropped {
				t.Fatalf("%q:\n got %v (ignored %d, dropped %d)\nwant %v (ignored %d, dropped %d)", payload, got, ignored, len(d.Dropped()), want, wantIgnored, wantDropped)
			}
			used := ""
			for _, key := range []string{"timestamp", "time", "ts", "epoch"} {
				if _, ok := special[key]; ok {
					used = key
				}
			}
			restamped := func(ns int64) int64 {
				if ns < MinReadingTime {
					return recvNS
				}
				return ns
			}
			if used != "" && len(out) > 0 {
				if want, ok := oracleTime(special[used]); ok && restamped(want) != out[0].TS {
					t.Fatalf("%q: %s = %v: TS %d, want %d", payload, used, special[used], out[0].TS, restamped(want))
				}
			}
			for _, key := range []string{"timestamp", "time", "ts", "epoch"} {
				if s, ok := special[key].(string); ok && !numberRE.MatchString(s) && len(out) > 0 {
					layout := "2006-01-02T15:04:05.999999999Z07:00"
					s = strings.ToUpper(strings.Replace(s, " ", "T", 1))
					if !strings.ContainsAny(s[10:], "Z+-") {
						s += "Z"
					} else if len(s) > 5 && s[len(s)-3] != ':' && strings.ContainsAny(s[len(s)-5:len(s)-4], "+-") {
						layout = "2006-01-02T15:04:05.999999999-0700"
					}
					tm, perr := time.Parse(layout, s)
					if perr != nil || key == used && restamped(tm.UnixNano()) != out[0].TS {
						t.Fatalf("%q: %s %q: time.Parse = %v, %v; ours %d", payload, key, s, tm.UnixNano(), perr, out[0].TS)
					}
				}
			}
		}

		// Plain values agree with the oracle.
		out, _, err = d.Decode(nil, FormatValue, payload, "dev1", "temp", testRecv)
		text := strings.Trim(string(payload), " \t\r\n")
		switch want, kind := oracleText(string(payload)); {
		case err != nil && (kind == textNumber || kind == textMissing):
			t.Fatalf("value %q: %v, oracle %v (kind %d)", payload, err, want, kind)
		case err == nil && kind == textMissing && len(out) != 0:
			t.Fatalf("value %q: got %v, want no reading", payload, out)
		case err == nil && kind == textNumber && (len(out) != 1 || math.Float64bits(want) != math.Float64bits(out[0].Value) || out[0].IsText()):
			t.Fatalf("value %q: got %v, oracle %v", payload, out, want)
		case kind == textOther && RejectReason(err) != oracleTextReason(text):
			t.Fatalf("value %q: %v, oracle reason %q", payload, err, oracleTextReason(text))
		case err == nil && kind == textOther && (len(out) != 1 || out[0].Text != text || out[0].Value != 0):
			t.Fatalf("value %q: got %v, want the text %q", payload, out, text)
		}
	})
}
