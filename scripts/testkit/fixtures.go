package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fixture is a payload copied from a format's or a device's own
// documentation, with the readings cairn makes of it. A fixture file is
// "# " comments (the source), "key: value" lines, a line "---", and the
// payload:
//
//	format: senml                  payload format
//	device: meter-1                the topic's {device}, if any
//	metric: light                  the topic's {metric}, if any
//	preset: tasmota                the preset that reads it (instead of format)
//	topic: tele/plug-1/SENSOR      the topic it is published on (presets)
//	time_zone: Europe/Berlin       the topic's time_zone, if any
//	reading: DEVICE METRIC TIME V [UNIT]
//	                               TIME is RFC 3339, or recv, or recv±duration
//	text: DEVICE METRIC TIME TEXT  a text reading (a state, an event)
//	dropped: text_too_long         a field left out for this reason
//	ignored: 2                     ignored count (default 0)
//	restamped: 1                   readings restamped (default 0)
//	reject: no_readings            the reason, if the message is rejected
//	skip: availability             the kind, if the message is skipped
//
// A reading's fields are separated by spaces; one that holds a space, or
// is empty, is written as a Go string literal ("kitchen door", "").
type Fixture struct {
	Name                   string // the file's name
	Format                 string
	Device, Metric, Reject string
	Preset, Topic          string
	TimeZone               string
	Skip                   string
	Readings               []FixtureReading
	Dropped                []string // reasons of the fields left out
	Ignored, Restamped     int
	Payload                []byte
}

// FixtureReading is an expected reading; its time is At, or the receive
// time plus Offset when At is zero.
type FixtureReading struct {
	Device, Metric string
	At             time.Time
	Offset         time.Duration
	Value          float64
	Text           string // of a text reading, else ""
	Unit           string
}

// TS returns the reading's time for a message received at recv.
func (r FixtureReading) TS(recv time.Time) int64 {
	if r.At.IsZero() {
		return recv.Add(r.Offset).UnixNano()
	}
	return r.At.UnixNano()
}

// LoadFixtures reads the fixture files (*.txt) in dir.
func LoadFixtures(t testing.TB, dir string) []Fixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	var out []Fixture
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		head, payload, ok := bytes.Cut(b, []byte("\n---\n"))
		if !ok {
			t.Fatalf("%s: no --- line", path)
		}
		fx := Fixture{Name: filepath.Base(path), Payload: payload}
		for _, line := range strings.Split(string(head), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			key, val, _ := strings.Cut(line, ": ")
			switch key {
			case "format":
				fx.Format = val
			case "device":
				fx.Device = val
			case "metric":
				fx.Metric = val
			case "reject":
				fx.Reject = val
			case "preset":
				fx.Preset = val
			case "topic":
				fx.Topic = val
			case "time_zone":
				fx.TimeZone = val
			case "skip":
				fx.Skip = val
			case "ignored":
				fx.Ignored, err = strconv.Atoi(val)
			case "restamped":
				fx.Restamped, err = strconv.Atoi(val)
			case "reading":
				var r FixtureReading
				r, err = parseFixtureReading(val)
				fx.Readings = append(fx.Readings, r)
			case "text":
				var r FixtureReading
				r, err = parseFixtureText(val)
				fx.Readings = append(fx.Readings, r)
			case "dropped":
				fx.Dropped = append(fx.Dropped, val)
			default:
				err = fmt.Errorf("unknown key %q", key)
			}
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
		}
		out = append(out, fx)
	}
	return out
}

func parseFixtureReading(s string) (FixtureReading, error) {
	f, err := fixtureFields(s)
	if err != nil {
		return FixtureReading{}, err
	}
	if len(f) != 4 && len(f) != 5 {
		return FixtureReading{}, errors.New("want DEVICE METRIC TIME VALUE [UNIT]")
	}
	r := FixtureReading{Device: f[0], Metric: f[1]}
	if len(f) == 5 {
		r.Unit = f[4]
	}
	if rest, ok := strings.CutPrefix(f[2], "recv"); ok {
		if rest != "" {
			r.Offset, err = time.ParseDuration(rest)
		}
	} else {
		r.At, err = time.Parse(time.RFC3339Nano, f[2])
	}
	if err != nil {
		return r, err
	}
	r.Value, err = strconv.ParseFloat(f[3], 64)
	return r, err
}

// parseFixtureText parses DEVICE METRIC TIME TEXT.
func parseFixtureText(s string) (FixtureReading, error) {
	f, err := fixtureFields(s)
	if err != nil {
		return FixtureReading{}, err
	}
	if len(f) != 4 || f[3] == "" {
		return FixtureReading{}, errors.New("want DEVICE METRIC TIME TEXT")
	}
	r, err := parseFixtureReading(strings.Join([]string{strconv.Quote(f[0]), strconv.Quote(f[1]), f[2], "0"}, " "))
	r.Text = f[3]
	return r, err
}

// fixtureFields splits s at spaces; a field that starts with '"' is a Go
// string literal.
func fixtureFields(s string) ([]string, error) {
	var out []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return out, nil
		}
		if s[0] != '"' {
			f, rest, _ := strings.Cut(s, " ")
			out, s = append(out, f), rest
			continue
		}
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("field %s: %v", s, err)
		}
		f, _ := strconv.Unquote(q)
		out, s = append(out, f), s[len(q):]
	}
}
