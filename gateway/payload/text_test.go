package payload

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
)

// TestDecode_Texts reads text values in every format: the exact texts,
// at the exact times, and the numbers and state words beside them as
// numbers.
func TestDecode_Texts(t *testing.T) {
	at := int64(1795341600123000000) // 2026-11-22T10:00:00.123Z
	runDecodeCases(t, []decodeCase{
		{"json state", FormatJSON, `{"ts":1795341600123,"system_mode":"heat","temperature":21.5}`, "trv", "",
			[]buffer.Reading{txt("trv", "system_mode", at, "heat"), rd("trv", "temperature", at, 21.5)}, 0},
		{"json words stay numbers", FormatJSON, `{"a":"ON","b":"off","c":"true","d":"Open","e":"closed","f":"23.5"}`, "d", "",
			[]buffer.Reading{rd("d", "a", recvNS, 1), rd("d", "b", recvNS, 0), rd("d", "c", recvNS, 1), rd("d", "d", recvNS, 1), rd("d", "e", recvNS, 0), rd("d", "f", recvNS, 23.5)}, 0},
		{"json trimmed, escapes read", FormatJSON, `{"mode":" \u0068eat\n","label":"a \"b\""}`, "d", "",
			[]buffer.Reading{txt("d", "mode", recvNS, "heat"), txt("d", "label", recvNS, `a "b"`)}, 0},
		{"json empty and missing stay missing", FormatJSON, `{"a":"","b":"unavailable","c":"x"}`, "d", "",
			[]buffer.Reading{txt("d", "c", recvNS, "x")}, 2},
		{"json unit is no text", FormatJSON, `{"t":21.5,"unit":"C","x":{"unit":"%"}}`, "d", "",
			[]buffer.Reading{rd("d", "t", recvNS, 21.5)}, 2},
		{"json device and time fields are no texts", FormatJSON, `{"device":"trv","time":"2026-11-22T10:00:00.123Z","mode":"heat"}`, "", "",
			[]buffer.Reading{txt("trv", "mode", at, "heat")}, 0},
		{"json text value named by topic", FormatJSON, `{"value":"heat"}`, "d", "mode", []buffer.Reading{txt("d", "mode", recvNS, "heat")}, 0},
		{"json number value named by topic beside a text", FormatJSON, `{"value":21.5,"mode":"heat"}`, "d", "t",
			[]buffer.Reading{rd("d", "t", recvNS, 21.5), txt("d", "mode", recvNS, "heat")}, 0},
		{"json 64 bytes", FormatJSON, `{"s":"` + strings.Repeat("é", 32) + `"}`, "d", "", []buffer.Reading{txt("d", "s", recvNS, strings.Repeat("é", 32))}, 0},
		{"json array of objects", FormatJSON, `[{"ts":1795341600.123,"action":"single"},{"action":"double"}]`, "b", "",
			[]buffer.Reading{txt("b", "action", at, "single"), txt("b", "action", recvNS, "double")}, 0},
		{"value", FormatValue, " home\n", "person.alice", "state", []buffer.Reading{txt("person.alice", "state", recvNS, "home")}, 0},
		{"auto value", FormatAuto, "heat", "trv", "mode", []buffer.Reading{txt("trv", "mode", recvNS, "heat")}, 0},
		{"value word stays a number", FormatValue, "OFF", "d", "relay", []buffer.Reading{rd("d", "relay", recvNS, 0)}, 0},
		{"senml vs", FormatSenML, `[{"bn":"urn:dev:ow:10e2073a01080063:","bt":1.320067464e+09,"n":"mode","vs":"heat"},{"n":"label","u":"Cel","t":1,"vs":"Machine Room"},{"n":"relay","vs":"ON"}]`, "", "",
			[]buffer.Reading{txt("urn:dev:ow:10e2073a01080063", "mode", 1320067464000000000, "heat"), txt("urn:dev:ow:10e2073a01080063", "label", 1320067465000000000, "Machine Room"),
				rd("urn:dev:ow:10e2073a01080063", "relay", 1320067464000000000, 1)}, 0},
		{"influx string fields", FormatInflux, `thermostat,device=trv state="heat",setpoint=21.5,window="open",note="" 1795341600123`, "", "",
			[]buffer.Reading{txt("trv", "thermostat.state", at, "heat"), rd("trv", "thermostat.setpoint", at, 21.5), rd("trv", "thermostat.window", at, 1)}, 1},
	})
}

// TestDecode_TextDropped: a text that cannot be a reading's leaves its
// field out under its own reason, and the message's other readings are
// kept; a message of such fields alone is no no_readings.
func TestDecode_TextDropped(t *testing.T) {
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		format          Format
		payload         string
		want            []buffer.Reading
		reasons, detail []string
	}{
		{FormatJSON, `{"t":1,"s":"` + long + `"}`, []buffer.Reading{rd("d", "t", recvNS, 1)},
			[]string{ReasonTextTooLong}, []string{`metric "s": text of 65 bytes, limit 64`}},
		{FormatJSON, `{"a":"x\u0001y","b":"` + long + `","t":1}`, []buffer.Reading{rd("d", "t", recvNS, 1)},
			[]string{ReasonInvalidText, ReasonTextTooLong}, []string{`metric "a": text holds the control character byte 0x01`, `metric "b"`}},
		{FormatJSON, "{\"s\":\"a\xffb\"}", nil, []string{ReasonInvalidText}, []string{"not valid UTF-8"}},
		{FormatSenML, `[{"bn":"d:","n":"s","vs":"` + long + `"},{"n":"t","v":2}]`, []buffer.Reading{rd("d", "t", recvNS, 2)},
			[]string{ReasonTextTooLong}, []string{`metric "s"`}},
		{FormatInflux, `m s="a` + "\t" + `b",t=3`, []buffer.Reading{rd("d", "m.t", recvNS, 3)}, []string{ReasonInvalidText}, []string{`metric "m.s"`}},
	} {
		var d Decoder
		got, ignored, err := d.Decode(nil, tc.format, []byte(tc.payload), "d", "", testRecv)
		if err != nil || ignored != 0 || !reflect.DeepEqual(noWords(t, got), tc.want) && len(got)+len(tc.want) > 0 {
			t.Errorf("Decode(%q) = %+v, %d, %v; want %+v", tc.payload, got, ignored, err, tc.want)
		}
		if reasons := droppedReasons(&d); !slices.Equal(reasons, tc.reasons) {
			t.Errorf("Decode(%q) dropped %q, want %q", tc.payload, reasons, tc.reasons)
		}
		for i, e := range d.Dropped() {
			if i < len(tc.detail) && !strings.Contains(e.Detail, tc.detail[i]) {
				t.Errorf("Decode(%q) dropped %d: %q, want it to hold %q", tc.payload, i, e.Detail, tc.detail[i])
			}
		}
		// The next message starts afresh.
		if _, _, err := d.Decode(nil, FormatJSON, []byte(`{"t":1}`), "d", "", testRecv); err != nil || len(d.Dropped()) != 0 {
			t.Errorf("after %q: %v, dropped %v", tc.payload, err, d.Dropped())
		}
	}
	// A message rejected whole has no dropped fields.
	var d Decoder
	if _, _, err := d.Decode(nil, FormatJSON, []byte(`{"s":"`+long+`","t":1e999}`), "d", "", testRecv); RejectReason(err) != ReasonNonFinite || len(d.Dropped()) != 0 {
		t.Errorf("rejected message: %v, dropped %v", err, d.Dropped())
	}
}

// TestDecode_TextAllocs: numbers stay free of allocations, and a text
// that repeats costs none once it has been seen (interned per Decoder).
func TestDecode_TextAllocs(t *testing.T) {
	for _, tc := range []struct {
		format  Format
		payload string
	}{
		{FormatJSON, `{"ts":1763800000123,"action":"single","battery":91}`},
		{FormatValue, "heat"},
		{FormatSenML, `[{"bn":"d:","n":"mode","vs":"heat"}]`},
		{FormatInflux, `m,device=d state="heat",t=1`},
	} {
		var d Decoder
		dst := make([]buffer.Reading, 0, 8)
		allocs := testing.AllocsPerRun(200, func() {
			if _, _, err := d.Decode(dst, tc.format, []byte(tc.payload), "d", "m", testRecv); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("Decode(%s, %q) allocates %v times per message, want at most 1", tc.format, tc.payload, allocs)
		}
	}
}

func TestDecoder_TextCacheIsBounded(t *testing.T) {
	var d Decoder
	for i := range 3 * maxInterned {
		text := "state " + itoa(i)
		out, _, err := d.Decode(nil, FormatValue, []byte(text), "d", "m", testRecv)
		if err != nil || out[0].Text != text {
			t.Fatalf("Decode(%q) = %+v, %v", text, out, err)
		}
		if len(d.texts) > maxInterned {
			t.Fatalf("text cache holds %d texts, limit %d", len(d.texts), maxInterned)
		}
	}
}

func BenchmarkDecode_JSONText(b *testing.B) {
	var d Decoder
	payload := []byte(`{"ts":1763800000123,"action":"single","battery":91,"linkquality":87}`)
	dst := make([]buffer.Reading, 0, 8)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, _, err := d.Decode(dst, FormatJSON, payload, "dev1", "", testRecv); err != nil {
			b.Fatal(err)
		}
	}
}

// badText reports whether r breaks the rules of texts and words: a text
// reading with a Value or a Word beside it, a text that cannot be a
// reading's, or one that is a number or a missing value (a state word is
// the text of a field known as a text); a Word that is not a state word
// or a boolean giving the reading's Value.
func badText(r buffer.Reading) bool {
	if r.Word != "" {
		if v, kind, word := parseText([]byte(r.Word)); r.IsText() || kind != textNumber || word != r.Word || v != r.Value {
			return true
		}
	}
	if !r.IsText() {
		return false
	}
	_, kind, word := parseText([]byte(r.Text))
	return r.Value != 0 || oracleTextReason(r.Text) != "" || kind != textOther && word == "" || strings.Trim(r.Text, " \t\r\n") != r.Text
}

// noWords returns a copy of rs without their Words, after checking that
// each Word is one a decoder gives (see badText): tests that check values
// and texts compare readings without them; TestDecode_Words checks them.
func noWords(t testing.TB, rs []buffer.Reading) []buffer.Reading {
	t.Helper()
	if rs == nil {
		return nil
	}
	out := slices.Clone(rs)
	for i := range out {
		if out[i].Word != "" && badText(out[i]) {
			t.Errorf("reading %+v: its word is not one of its value", out[i])
		}
		out[i].Word = ""
	}
	return out
}
