package gateway

import (
	"fmt"
	"time"

	"github.com/cairn-gateway/cairn/gateway/payload"
)

// PresetRoutes returns the routes of the preset name (payload.PresetRoutes),
// their topics under base ("" for the preset's own), with zone for times
// without an offset (nil: the preset's default, UTC or the gateway's local
// time).
func PresetRoutes(name, base string, zone *time.Location) ([]Route, error) {
	prs, err := payload.PresetRoutes(name, base, zone)
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = payload.PresetBase(name)
	}
	routes := make([]Route, 0, len(prs))
	for _, pr := range prs {
		pat, err := ParsePattern(pr.Pattern)
		if err != nil {
			return nil, fmt.Errorf("preset %s: base_topic %q: %v", name, base, err)
		}
		routes = append(routes, Route{Pattern: pat, Route: pr.Route})
	}
	return routes, nil
}
