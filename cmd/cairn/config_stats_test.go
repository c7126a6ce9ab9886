package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-gateway/cairn/aggregate"
	"github.com/cairn-gateway/cairn/uplink"
)

// TestLoadConfig_UplinkData loads uplink sections with data and group:
// good ones give the uplink's options, bad ones fail naming the file, the
// key and the reason.
func TestLoadConfig_UplinkData(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		data       uplink.Data
		group      aggregate.Level
		err        string
	}{
		{name: "default", yaml: "", data: uplink.Readings},
		{name: "readings", yaml: "  data: readings\n", data: uplink.Readings},
		{name: "minute", yaml: "  data: stats\n  group: minute\n", data: uplink.Stats, group: aggregate.Minute},
		{name: "hour", yaml: "  data: stats\n  group: hour\n", data: uplink.Stats, group: aggregate.Hour},
		{name: "unknown data", yaml: "  data: aggregates\n", err: `uplink.data: must be readings or stats (got "aggregates")`},
		{name: "no group", yaml: "  data: stats\n", err: "uplink.group: data: stats sends one record per series and period: say minute or hour"},
		{name: "day", yaml: "  data: stats\n  group: day\n", err: `uplink.group: must be minute or hour (got "day")`},
		{name: "group without stats", yaml: "  group: minute\n", err: `uplink.group: only with data: stats (got "minute" with data: readings)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cairn.yaml")
			yaml := "uplink:\n  url: http://127.0.0.1:8428/api/v1/write\n  format: prometheus\n" + tc.yaml
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path)
			if tc.err != "" {
				var ce *configError
				if err == nil || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want a configError of %s with %q", err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.uplinks[0].Data != tc.data || cfg.uplinks[0].Group != tc.group {
				t.Errorf("got data %v, group %v; want %v, %v", cfg.uplinks[0].Data, cfg.uplinks[0].Group, tc.data, tc.group)
			}
		})
	}
}
