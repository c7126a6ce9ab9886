package gateway

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

var testRecv = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// presetFixtures returns the payload package's testdata/presets/*.txt:
// messages copied from each family's own documentation.
func presetFixtures(t testing.TB) []testkit.Fixture {
	t.Helper()
	return testkit.LoadFixtures(t, filepath.Join("payload", "testdata", "presets"))
}

// TestPresetRoutes_Fixtures checks that every preset fixture's topic is
// routed by its preset's routes, and to a route of the kind the fixture
// says (skipped or read).
func TestPresetRoutes_Fixtures(t *testing.T) {
	for _, fx := range presetFixtures(t) {
		routes, err := PresetRoutes(fx.Preset, "", nil)
		if err != nil {
			t.Fatalf("%s: %v", fx.Name, err)
		}
		i, _, _ := matchRoute(routes, fx.Topic)
		if i < 0 {
			t.Errorf("%s: no route of preset %s matches %q", fx.Name, fx.Preset, fx.Topic)
			continue
		}
		if r := routes[i]; r.Skip != "" && r.Skip != fx.Skip {
			t.Errorf("%s: topic %q routed to a route skipping %s, want %q", fx.Name, fx.Topic, r.Skip, fx.Skip)
		}
	}
}

// TestPresetRoutes_Names checks every preset's patterns parse with their
// own base and with another.
func TestPresetRoutes_Names(t *testing.T) {
	for _, name := range payload.PresetNames() {
		if _, err := PresetRoutes(name, "", nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if payload.PresetBase(name) == "" {
			continue
		}
		if _, err := PresetRoutes(name, "my/base", nil); err != nil {
			t.Errorf("%s with a base topic: %v", name, err)
		}
		if _, err := PresetRoutes(name, "my/#/base", nil); err == nil {
			t.Errorf("%s with # mid-way through its base topic: no error", name)
		}
	}
}

func mustPattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}
