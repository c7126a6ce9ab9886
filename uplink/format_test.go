package uplink

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/buffer"
)

func outboxReading(device, metric, unit string, ts int64, v float64) buffer.OutboxReading {
	return buffer.OutboxReading{Reading: buffer.Reading{Device: device, Metric: metric, Unit: unit, TS: ts, Value: v}}
}

// lpPoint is a line of line protocol as an upstream reads it.
type lpPoint struct {
	Measurement string
	Tags        map[string]string
	Fields      map[string]string
	TS          string
}

// lpSplit splits s at each sep that no backslash escapes, as line
// protocol parsers do: a backslash and the byte after it are one.
func lpSplit(s string, sep byte, n int) []string {
	var out []string
	from := 0
	for i := 0; i < len(s) && (n < 0 || len(out) < n-1); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			out = append(out, s[from:i])
			from = i + 1
		}
	}
	return append(out, s[from:])
}

// lpUnescape reads an escaped name or tag value as InfluxDB documents
// line protocol and VictoriaMetrics reads it: a backslash before a
// comma, an equals sign, a space or a backslash stands for that byte;
// any other backslash stands for itself.
func lpUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(",= \\", s[i+1]) >= 0 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseLP parses a body of line protocol.
func parseLP(t *testing.T, body string) []lpPoint {
	t.Helper()
	var out []lpPoint
	for line := range strings.Lines(body) {
		parts := lpSplit(strings.TrimSuffix(line, "\n"), ' ', -1)
		if len(parts) != 3 {
			t.Fatalf("line %q: %d parts, want 3", line, len(parts))
		}
		p := lpPoint{Tags: map[string]string{}, Fields: map[string]string{}, TS: parts[2]}
		key := lpSplit(parts[0], ',', -1)
		p.Measurement = lpUnescape(key[0])
		for _, tag := range key[1:] {
			kv := lpSplit(tag, '=', 2)
			if len(kv) != 2 {
				t.Fatalf("line %q: tag %q", line, tag)
			}
			p.Tags[lpUnescape(kv[0])] = lpUnescape(kv[1])
		}
		for _, f := range lpSplit(parts[1], ',', -1) {
			kv := lpSplit(f, '=', 2)
			if len(kv) != 2 {
				t.Fatalf("line %q: field %q", line, f)
			}
			p.Fields[lpUnescape(kv[0])] = kv[1]
		}
		out = append(out, p)
	}
	return out
}

func TestEncoder_InfluxEscapesNamesAndUnits(t *testing.T) {
	tests := []struct {
		device, metric, unit string
		want                 string
	}{
		{"kitchen", "t", "", `readings,device=kitchen,gateway=gw t=1 5`},
		{"kitchen", "t", "°C", `readings,device=kitchen,gateway=gw,unit=°C t=1 5`},
		{"kitchen/door", "open", "", `readings,device=kitchen/door,gateway=gw open=1 5`},
		{"living room", "température ambiante", "°C", `readings,device=living\ room,gateway=gw,unit=°C température\ ambiante=1 5`},
		{"café", "débit", "m³/h", `readings,device=café,gateway=gw,unit=m³/h débit=1 5`},
		{"a,b=c", "x,y=z", "W h,=", `readings,device=a\,b\=c,gateway=gw,unit=W\ h\,\= x\,y\=z=1 5`},
		{`"quoted"`, `say "hi"`, `"`, `readings,device="quoted",gateway=gw,unit=" say\ "hi"=1 5`},
		{`C:\temp`, `a\b`, `µ\g`, `readings,device=C:\temp,gateway=gw,unit=µ\g a\b=1 5`},
		// Names that are not WritableName: not written.
		{`end\`, "t", "", ""},
		{"d", `x\,y`, "", ""},
		{"d", `a\ b`, "", ""},
		{"d", `a\=b`, "", ""},
		{"line\nbreak", "t", "", ""},
		// A unit that is not: the reading goes without it.
		{"d", "t", `\\`, `readings,device=d,gateway=gw t=1 5`},
		{"d", "t", "°C\r", `readings,device=d,gateway=gw t=1 5`},
	}
	e := newEncoder(Influx, "readings", "gw")
	for _, tt := range tests {
		body, skipped := e.encode("b", []buffer.OutboxReading{outboxReading(tt.device, tt.metric, tt.unit, 5, 1)})
		if tt.want == "" {
			if len(body) != 0 || skipped != 1 {
				t.Errorf("%q %q %q: got %q (skipped %d), want it skipped", tt.device, tt.metric, tt.unit, body, skipped)
			}
			continue
		}
		if got := strings.TrimSuffix(string(body), "\n"); got != tt.want || skipped != 0 {
			t.Errorf("%q %q %q:\n got %s (skipped %d)\nwant %s", tt.device, tt.metric, tt.unit, got, skipped, tt.want)
			continue
		}
		p := parseLP(t, string(body))[0]
		wantTags := map[string]string{"device": tt.device, "gateway": "gw"}
		if tt.unit != "" && WritableName(tt.unit) {
			wantTags["unit"] = tt.unit
		}
		if !reflect.DeepEqual(p.Tags, wantTags) || p.Fields[tt.metric] != "1" {
			t.Errorf("%q %q %q: read back as %+v", tt.device, tt.metric, tt.unit, p)
		}
	}
}

// Whatever names and units line protocol can carry (WritableName), an
// upstream reads back what was written; the others are skipped.
func TestEncoder_InfluxEscapesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Z", "0", ",", "=", " ", `\`, `"`, "/", "é", "°", "'", "#", "_"}
	word := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	e := newEncoder(Influx, `my, measure\ment`, `gw =1\a`)
	written := 0
	for range 2000 {
		dev, met, unit := word(), word(), word()
		body, skipped := e.encode("b", []buffer.OutboxReading{outboxReading(dev, met, unit, 7, 2.5)})
		if !WritableName(dev) || !WritableName(met) {
			if len(body) != 0 || skipped != 1 {
				t.Fatalf("%q %q %q: wrote %q (skipped %d), want it skipped", dev, met, unit, body, skipped)
			}
			continue
		}
		written++
		ps := parseLP(t, string(body))
		if len(ps) != 1 {
			t.Fatalf("%q %q %q: %d lines: %s", dev, met, unit, len(ps), body)
		}
		want := lpPoint{
			Measurement: `my, measure\ment`,
			Tags:        map[string]string{"device": dev, "gateway": `gw =1\a`, "unit": unit},
			Fields:      map[string]string{met: "2.5"},
			TS:          "7",
		}
		if !WritableName(unit) {
			delete(want.Tags, "unit")
		}
		if !reflect.DeepEqual(ps[0], want) {
			t.Fatalf("%q %q %q: wrote %s read back %+v", dev, met, unit, body, ps[0])
		}
	}
	if written < 500 {
		t.Errorf("only %d of 2000 written: the test checks too little", written)
	}
}

// The readings of one device and timestamp share a line while their
// units agree; a reading without a unit has no unit tag.
func TestEncoder_InfluxLinesByUnit(t *testing.T) {
	e := newEncoder(Influx, "r", "")
	body, _ := e.encode("b", []buffer.OutboxReading{
		outboxReading("d", "t", "°C", 5, 21.5),
		outboxReading("d", "t2", "°C", 5, 22),
		outboxReading("d", "h", "%", 5, 40),
		outboxReading("d", "n", "", 5, 3),
		outboxReading("d", "n2", "", 5, 4),
		outboxReading("d", "t", "°C", 6, 21.6),
	})
	want := "r,device=d,unit=°C t=21.5,t2=22 5\n" +
		"r,device=d,unit=% h=40 5\n" +
		"r,device=d n=3,n2=4 5\n" +
		"r,device=d,unit=°C t=21.6 6\n"
	if string(body) != want {
		t.Errorf("got\n%s\nwant\n%s", body, want)
	}
}

// A reading whose names line protocol cannot carry is left out and
// counted, the others go; one whose unit it cannot carry goes without.
func TestEncoder_InfluxSkipsNamesItCannotWrite(t *testing.T) {
	e := newEncoder(Influx, "r", "")
	body, skipped := e.encode("b", []buffer.OutboxReading{
		outboxReading("a\nb", "t", "", 5, 1),
		outboxReading("d", "t\r", "", 5, 1),
		outboxReading("d", "t", "", 5, 2),
		outboxReading("d", "t", `°C\`, 6, 1),
	})
	if want := "r,device=d t=2 5\nr,device=d t=1 6\n"; string(body) != want || skipped != 2 {
		t.Errorf("got %q (skipped %d), want %q (skipped 2)", body, skipped, want)
	}
}

func TestEncoder_JSONUnitsAndEscapes(t *testing.T) {
	e := newEncoder(JSON, "", `gw "1"`)
	rs := []buffer.OutboxReading{
		outboxReading("kitchen/door", "température", "°C", 1795310171000000000, 21.5),
		outboxReading(`say "hi"\`, "n", "", 5, 1),
		outboxReading("tab\there\x01", "bad\xffutf8", "m/s²", 6, 2),
	}
	rs[2].Seq = 0x4b0
	body, skipped := e.encode(`gw "1"-7`, rs)
	if skipped != 0 {
		t.Errorf("skipped %d", skipped)
	}
	type readingDoc struct {
		ID, Device, Metric, TS string
		Unit                   *string
		Value                  float64
	}
	var doc struct {
		Gateway, Batch string
		Readings       []readingDoc
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	if doc.Gateway != `gw "1"` || doc.Batch != `gw "1"-7` || len(doc.Readings) != 3 {
		t.Fatalf("got %+v", doc)
	}
	unit := func(r readingDoc) string {
		if r.Unit == nil {
			return "(none)"
		}
		return strconv.Quote(*r.Unit)
	}
	got := make([]string, len(doc.Readings))
	for i, r := range doc.Readings {
		got[i] = strings.Join([]string{r.ID, r.Device, r.Metric, unit(r)}, " | ")
	}
	want := []string{
		`1795310171000000000-kitchen/door-0000000000000000 | kitchen/door | température | "°C"`,
		`0000000000000000005-say "hi"\-0000000000000000 | say "hi"\ | n | (none)`,
		"0000000000000000006-tab\there\x01-00000000000004b0 | tab\there\x01 | bad\ufffdutf8 | \"m/s²\"",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(string(body), `"unit":""`) {
		t.Errorf("an unknown unit is written: %s", body)
	}
}

// A measurement or a gateway id that line protocol cannot carry would
// have every batch refused: New refuses it for line protocol, not for
// JSON.
func TestNew_RefusesNamesLineProtocolCannotCarry(t *testing.T) {
	for _, o := range []Options{
		{URL: "http://127.0.0.1:1/write", Measurement: `readings\`},
		{URL: "http://127.0.0.1:1/write", Gateway: "gw\n1"},
	} {
		if _, err := withDefaults(o); err == nil || !strings.Contains(err.Error(), "line protocol cannot carry") {
			t.Errorf("%+v: got %v, want a refusal", o, err)
		}
		o.Format = JSON
		if _, err := withDefaults(o); err != nil {
			t.Errorf("JSON %+v: got %v", o, err)
		}
	}
}
