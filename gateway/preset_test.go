package gateway

import (
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// presetFixtures returns testdata/presets/*.txt: messages copied from each
// family's own documentation (testkit.Fixture says how they are written).
func presetFixtures(t testing.TB) []testkit.Fixture {
	t.Helper()
	return testkit.LoadFixtures(t, filepath.Join("testdata", "presets"))
}

// routeFor returns the route of the fixture's preset that its topic
// matches, and what the topic captured.
func routeFor(t testing.TB, fx testkit.Fixture) (r *Route, device, metric string) {
	t.Helper()
	var zone *time.Location
	if fx.TimeZone != "" {
		var err error
		if zone, err = time.LoadLocation(fx.TimeZone); err != nil {
			t.Fatal(err)
		}
	}
	routes, err := PresetRoutes(fx.Preset, "", zone)
	if err != nil {
		t.Fatalf("%s: %v", fx.Name, err)
	}
	for i := range routes {
		if d, m, ok := routes[i].Pattern.Match(fx.Topic); ok {
			return &routes[i], d, m
		}
	}
	t.Fatalf("%s: no route of preset %s matches %q", fx.Name, fx.Preset, fx.Topic)
	return nil, "", ""
}

// TestPresets_Fixtures reads each fixture with its preset and checks the
// exact readings, or that the message is skipped as the kind it is.
func TestPresets_Fixtures(t *testing.T) {
	perPreset := map[string]int{}
	for _, fx := range presetFixtures(t) {
		perPreset[fx.Preset]++
		t.Run(fx.Name, func(t *testing.T) {
			r, device, metric := routeFor(t, fx)
			d := Decoder{units: &unitBook{}}
			got, ignored, err := d.DecodeRoute(nil, r, fx.Payload, device, metric, testRecv)
			if kind := SkipKind(err); kind != fx.Skip {
				t.Fatalf("skip %q (%v), want %q", kind, err, fx.Skip)
			}
			if fx.Skip != "" {
				return
			}
			if reason := RejectReason(err); reason != fx.Reject {
				t.Fatalf("reason %q (%v), want %q", reason, err, fx.Reject)
			}
			want := []buffer.Reading{}
			for _, fr := range fx.Readings {
				want = append(want, buffer.Reading{Device: fr.Device, Metric: fr.Metric, TS: fr.TS(testRecv), Value: fr.Value, Unit: fr.Unit})
			}
			if got == nil {
				got = []buffer.Reading{}
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("readings differ\n got %s\nwant %s", showReadings(got), showReadings(want))
			}
			if fx.Reject == "" && ignored != fx.Ignored {
				t.Errorf("ignored %d, want %d", ignored, fx.Ignored)
			}
		})
	}
	for _, name := range PresetNames() {
		if perPreset[name] < 3 {
			t.Errorf("preset %s has %d fixtures, want at least 3", name, perPreset[name])
		}
	}
}

func showReadings(rs []buffer.Reading) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString("\n  " + r.Device + " | " + r.Metric + " | " + r.Time().Format(time.RFC3339Nano) + " | " + formatValue(r.Value) + " | " + r.Unit)
	}
	return b.String()
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestPresets_Names checks every preset's routes parse with their own base
// and with another, and that a base_topic is refused where there is none.
func TestPresets_Names(t *testing.T) {
	for _, name := range PresetNames() {
		if _, err := PresetRoutes(name, "", nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		_, err := PresetRoutes(name, "my/base", nil)
		if (err != nil) != (PresetBase(name) == "") {
			t.Errorf("%s with a base topic: %v", name, err)
		}
	}
	if _, err := PresetRoutes("tasmotta", "", nil); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("unknown preset: %v", err)
	}
	var se *SkipError
	if errors.As(error(&SkipError{Kind: SkipMeta}), &se) && SkipKind(se) != SkipMeta {
		t.Error("SkipKind")
	}
}
