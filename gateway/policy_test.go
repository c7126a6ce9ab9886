package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/packets"

	"github.com/cairn-gateway/cairn/buffer"
	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/gateway/payload"
	"github.com/cairn-gateway/cairn/scripts/testkit"
)

// routeMix is a list of routes as mqtt.topics may give them.
type routeMix struct {
	name   string
	routes []Route
}

// userShapes are the shapes of the patterns users write: a device level,
// a device over levels, a device from the payload in every format, a
// mapping with a device field, and wildcards.
func userShapes(t testing.TB) []routeMix {
	t.Helper()
	shape := func(pattern string, f payload.Format, m *payload.Mapping) routeMix {
		p, err := ParsePattern(pattern)
		if err != nil {
			t.Fatal(err)
		}
		name := pattern + " (" + f.String() + ")"
		if m != nil {
			name = pattern + " (device_field " + m.DeviceField + ")"
		}
		return routeMix{name: name, routes: []Route{{Pattern: p, Route: payload.Route{Format: f, Mapping: m}}}}
	}
	return []routeMix{
		shape("sensors/{device}/{metric}", payload.FormatAuto, nil),
		shape("sensors/{device}/telemetry", payload.FormatJSON, nil),
		shape("sensors/{device}/{metric+}", payload.FormatAuto, nil),
		shape("{device}/{metric}", payload.FormatValue, nil),
		shape("{device}/#", payload.FormatAuto, nil),
		shape("sensors/{device+}", payload.FormatJSON, nil),
		shape("sensors/{device}/{device}/state", payload.FormatValue, nil),
		shape("sensors/+/bulk", payload.FormatJSON, nil),
		shape("sensors/+/senml", payload.FormatSenML, nil),
		shape("sensors/+/influx", payload.FormatInflux, nil),
		shape("sensors/#", payload.FormatAuto, nil),
		shape("+/{device}/auto", payload.FormatAuto, nil),
		shape("sensors/+/mapped", payload.FormatJSON, &payload.Mapping{DeviceField: "meta.id"}),
		shape("mapped/{device}", payload.FormatJSON, &payload.Mapping{DeviceField: "meta.id"}),
	}
}

// routeMixes returns every preset alone and in ordered pairs, the user
// shapes alone and in ordered pairs, and each user shape before and after
// each preset.
func routeMixes(t testing.TB) []routeMix {
	t.Helper()
	var presets []routeMix
	for _, name := range payload.PresetNames() {
		rs, err := PresetRoutes(name, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		presets = append(presets, routeMix{name: name, routes: rs})
	}
	shapes := userShapes(t)
	join := func(a, b routeMix) routeMix {
		return routeMix{name: a.name + " + " + b.name, routes: append(append([]Route{}, a.routes...), b.routes...)}
	}
	mixes := append(append([]routeMix{}, presets...), shapes...)
	for _, group := range [][]routeMix{presets, shapes} {
		for i, a := range group {
			for j, b := range group {
				if i != j {
					mixes = append(mixes, join(a, b))
				}
			}
		}
	}
	for _, s := range shapes {
		for _, p := range presets {
			mixes = append(mixes, join(s, p), join(p, s))
		}
	}
	return mixes
}

// attackPayloads name other devices every way a payload can: a device
// field, a BLE id, a SenML base name, line protocol tags, a mapped
// field, a Tasmota sensor Id, discovery and statestream units, and
// devices named like markup and spreadsheet formulas.
var attackPayloads = []string{
	`{"device":"garage","temperature":99.9}`,
	`[{"device":"garage","t":1},{"device":"cellar","t":2}]`,
	`{"device":"<script>alert(1)</script>","t":1}`,
	`{"device":"=HYPERLINK(\"http://evil\",\"x\")","t":1}`,
	`{"id":"garage","tempc":20}`,
	`{"meta":{"id":"garage"},"t":1}`,
	`[{"bn":"garage:","n":"t","v":1}]`,
	`[{"n":"garage","u":"Cel","v":1}]`,
	"m,device=garage t=1\ncpu,host=garage usage=2\n",
	`{"DS18B20-1":{"Id":"garage","Temperature":1}}`,
	`{"unit_of_meas":"°C","stat_t":"garage/sensor/t/state"}`,
	`{"unit_of_measurement":"°C","state_topic":"~/sensor/t/state","~":"garage"}`,
	`"°C"`,
	`{"method":"NotifyStatus","params":{"switch:0":{"apower":1}}}`,
	`{"uplink_message":{"decoded_payload":{"t":1}},"end_device_ids":{"device_id":"garage"}}`,
	`{"deviceInfo":{"devEui":"garage"},"object":{"t":1}}`,
	`21.5`,
	`ON`,
}

// patternTopics returns topics that pattern matches, with each level that
// is not literal taken from names, and multi-level parts of one and two
// levels (and none for "#").
func patternTopics(pattern string, names []string) []string {
	topics := []string{""}
	for i, l := range strings.Split(pattern, "/") {
		var fills []string
		switch l {
		case "+", PlaceholderDevice, PlaceholderMetric:
			fills = names
		case "#":
			fills = []string{"", "x", names[0] + "/x"}
		case PlaceholderDeviceLevels, PlaceholderMetricLevels:
			fills = append(append([]string{}, names...), names[0]+"/x", "x/"+names[0])
		default:
			fills = []string{l}
		}
		var next []string
		for _, t := range topics {
			for _, f := range fills {
				switch {
				case l == "#" && f == "":
					next = append(next, t)
				case i == 0:
					next = append(next, f)
				default:
					next = append(next, t+"/"+f)
				}
			}
		}
		topics = next
	}
	return topics
}

// TestPolicy_SensorWritesOnlyAsItself is DESIGN's promise 10: for every
// mix of presets and user patterns, users named like any literal level
// of any pattern (homeassistant, zigbee2mqtt, tele, shellies, …) publish
// to every topic of every route of the mix, with payloads that name
// other devices in every way a format or preset reads one. Whatever the
// broker lets through, decoded by the route that decodes it, stores
// readings and units only under the user's own name (or, for Tasmota's
// sensors with an Id, NAME/ID). A user an ACL line opens a payload's
// topic to stores other devices' readings there.
func TestPolicy_SensorWritesOnlyAsItself(t *testing.T) {
	acl, err := ParseACL([]byte("user bridge\nwrite sensors/+/bulk\n"))
	if err != nil {
		t.Fatal(err)
	}
	mixes := routeMixes(t)
	users := map[string]bool{"kitchen": true}
	for _, m := range mixes {
		for _, r := range m.routes {
			for _, l := range strings.Split(r.Pattern.String(), "/") {
				if ValidAccount(l) && !strings.ContainsAny(l, "{}+#") {
					users[l] = true
				}
			}
		}
	}
	for _, u := range []string{"homeassistant", "zigbee2mqtt", "tele", "shellies", "stat", "telegraf"} {
		if !users[u] {
			t.Fatalf("user %s, named like a preset's base topic, is not tried", u)
		}
	}
	payloads := map[string][][]byte{} // by preset; "" for all
	for _, p := range attackPayloads {
		payloads[""] = append(payloads[""], []byte(p))
	}
	for _, fx := range presetFixtures(t) {
		payloads[fx.Preset] = append(payloads[fx.Preset], fx.Payload)
	}

	// decoded holds the devices that decoding every payload on a topic
	// by a route stored readings or units under, by route and topic.
	decoded := map[string]map[string]bool{}
	devicesOf := func(r *Route, topic, device, metric string) map[string]bool {
		key := fmt.Sprintf("%s|%s|%s|%p|%s", r.Preset, r.Pattern, r.Format, r.Mapping, topic)
		if devs, ok := decoded[key]; ok {
			return devs
		}
		devs := map[string]bool{}
		book := &unitBook{}
		for _, set := range []string{"", r.Preset} {
			for _, pl := range payloads[set] {
				d := payload.Decoder{Units: book}
				out, _, err := d.DecodeRoute(nil, &r.Route, pl, device, metric, testRecv)
				if err == nil {
					for _, rd := range out {
						devs[rd.Device] = true
					}
				}
			}
		}
		for dev := range book.units {
			devs[dev] = true
		}
		decoded[key] = devs
		return devs
	}
	own := func(user, device string) bool { return device == user || strings.HasPrefix(device, user+"/") }

	var judged, allowed, bridged int
	for _, m := range mixes {
		p := newPolicy(m.routes, acl)
		h := &guardHook{}
		for user := range users {
			g := &clientGuard{user: user}
			names := []string{user, "garage", "x"}
			seen := map[string]bool{}
			for _, r := range m.routes {
				for _, topic := range patternTopics(r.Pattern.String(), names) {
					if seen[topic] {
						continue
					}
					seen[topic] = true
					judged++
					if h.writeReason(g, p, topic) != "" {
						continue
					}
					i, device, metric := matchRoute(p.routes, topic)
					if i < 0 {
						continue
					}
					allowed++
					if covers(g.rulesUnder(p).granted, topic) {
						continue // an ACL line opens it
					}
					for dev := range devicesOf(&p.routes[i], topic, device, metric) {
						if !own(user, dev) {
							t.Errorf("%s: user %s publishing to %s stores device %q (route %s)", m.name, user, topic, dev, p.routes[i].Pattern)
						}
					}
				}
			}
		}
		// The ACL line opens the bulk topic to the bridge, and only to it.
		g := &clientGuard{user: "bridge"}
		if i, device, metric := matchRoute(p.routes, "sensors/bridge/bulk"); i >= 0 && h.writeReason(g, p, "sensors/bridge/bulk") == "" {
			if devicesOf(&p.routes[i], "sensors/bridge/bulk", device, metric)["garage"] {
				bridged++
			}
		}
	}
	if allowed == 0 || bridged == 0 {
		t.Errorf("%d publishes judged, %d allowed and decoded, %d mixes where the bridge stored garage: the test tried nothing", judged, allowed, bridged)
	}
	t.Logf("%d mixes, %d users, %d publishes judged, %d allowed and decoded (%d route and topic pairs), %d mixes where the ACL line let the bridge store garage",
		len(mixes), len(users), judged, allowed, len(decoded), bridged)
}

// TestPolicy_FirstRouteDecides: a publish is judged for the first route
// its topic matches, the one that decodes it.
func TestPolicy_FirstRouteDecides(t *testing.T) {
	bulk, err := ParsePattern("sensors/+/bulk")
	if err != nil {
		t.Fatal(err)
	}
	own, err := ParsePattern("sensors/{device}/{metric}")
	if err != nil {
		t.Fatal(err)
	}
	routes := []Route{{Pattern: bulk, Route: payload.Route{Format: payload.FormatJSON}}, {Pattern: own}}
	acl, err := ParseACL([]byte("user kitchen\nwrite sensors/kitchen/bulk\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		acl         *ACL
		user, topic string
		want        string
	}{
		{nil, "kitchen", "sensors/kitchen/bulk", RefusePublish},
		{nil, "kitchen", "sensors/kitchen/temperature", ""},
		{nil, "kitchen", "sensors/garage/temperature", RefuseOtherDevice},
		{nil, "kitchen", "elsewhere/kitchen", RefusePublish},
		{acl, "kitchen", "sensors/kitchen/bulk", ""},
		{acl, "kitchen", "sensors/garage/bulk", RefusePublish},
		{acl, "garage", "sensors/garage/bulk", RefusePublish},
	} {
		g := &clientGuard{user: c.user}
		if got := new(guardHook).writeReason(g, newPolicy(routes, c.acl), c.topic); got != c.want {
			t.Errorf("ACL %v: %s publishing to %s: %q, want %q", c.acl != nil, c.user, c.topic, got, c.want)
		}
	}
}

// TestPayloadDevices_SameRulesAsTopics: a device id that a payload names
// is held to the rule a topic's device id is held to
// (encoding.CheckDevice), in every format and preset that reads one.
func TestPayloadDevices_SameRulesAsTopics(t *testing.T) {
	names := []string{
		"garage", "Küche 1", "kitchen/door", "<script>alert(1)</script>", `=HYPERLINK("http://evil","x")`,
		"+cmd", "@SUM(1)", "-1", ".", "..", "", "a\x00b", "a\tb", "a\u200bb", "\xff",
		strings.Repeat("d", encoding.MaxDeviceLen), strings.Repeat("d", encoding.MaxDeviceLen+1),
	}
	bulk := mustPattern("sensors/+/bulk")
	ble, err := PresetRoutes("openmqttgateway", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	bleRoute, _, _ := matchRoute(ble, "home/gw/BTtoMQTT/AABB")
	jsonString := func(s string) string {
		if !utf8.ValidString(s) {
			return `"` + s + `"` // as a sender may: json.Marshal would mend it
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	influxTag := strings.NewReplacer(",", `\,`, "=", `\=`, " ", `\ `).Replace
	for _, name := range names {
		wantOK := encoding.CheckDevice(name) == ""
		d := payload.Decoder{Units: &unitBook{}}
		_, _, err := d.Decode(nil, payload.FormatValue, []byte("1"), name, "t", testRecv)
		if (err == nil) != wantOK {
			t.Fatalf("%q from a topic: %v, want accepted %v", name, err, wantOK)
		}
		for _, c := range []struct {
			what    string
			route   Route
			topic   string
			payload string
		}{
			{"a json device field", Route{Pattern: bulk, Route: payload.Route{Format: payload.FormatJSON}}, "sensors/x/bulk", `{"device":` + jsonString(name) + `,"t":1}`},
			{"a senml base name", Route{Pattern: bulk, Route: payload.Route{Format: payload.FormatSenML}}, "sensors/x/bulk", `[{"bn":` + jsonString(name) + `,"n":"t","v":1}]`},
			{"a line protocol device tag", Route{Pattern: bulk, Route: payload.Route{Format: payload.FormatInflux}}, "sensors/x/bulk", "m,device=" + influxTag(name) + " t=1"},
			{"a mapped device_field", Route{Pattern: bulk, Route: payload.Route{Format: payload.FormatJSON, Mapping: &payload.Mapping{DeviceField: "meta.id"}}}, "sensors/x/bulk", `{"meta":{"id":` + jsonString(name) + `},"t":1}`},
			{"a BLE id", ble[bleRoute], "home/gw/BTtoMQTT/AABB", `{"id":` + jsonString(name) + `,"tempc":1}`},
		} {
			if c.what == "a line protocol device tag" && strings.ContainsAny(name, "\x00\t\n\\") {
				continue // not a tag value line protocol can carry
			}
			if c.what == "a senml base name" && strings.HasSuffix(name, "/") {
				continue // a base name's trailing '/' is its separator
			}
			i, device, metric := matchRoute([]Route{c.route}, c.topic)
			if i < 0 {
				t.Fatalf("%s: no match", c.topic)
			}
			d := payload.Decoder{Units: &unitBook{}}
			out, _, err := d.DecodeRoute(nil, &c.route.Route, []byte(c.payload), device, metric, testRecv)
			switch {
			case wantOK && (err != nil || len(out) != 1 || out[0].Device != name):
				t.Errorf("%q in %s: %v %+v, want one reading of it", name, c.what, err, out)
			case !wantOK && err == nil:
				t.Errorf("%q in %s: stored as %+v, want it refused as a topic's is", name, c.what, out)
			}
		}
	}
}

// TestBroker_DecodesByTheRoutesItJudgedBy: a message judged before
// SetRoutes is decoded by the routes it was judged by, and the next one
// is judged by the new routes, so that a reload between the two steps
// cannot let a message through for one route and decode it by another.
func TestBroker_DecodesByTheRoutesItJudgedBy(t *testing.T) {
	store, w := testkit.StartWriter(t, buffer.Options{}, buffer.WriterOptions{})
	own := []Route{{Pattern: mustPattern("sensors/{device}/{metric}")}}                                             // the device is the topic's
	bulk := []Route{{Pattern: mustPattern("sensors/+/{metric}"), Route: payload.Route{Format: payload.FormatJSON}}} // the payload's
	in := NewIngester(w, IngesterOptions{Routes: own})
	log := slog.New(slog.DiscardHandler)
	b, err := NewBroker(BrokerOptions{Ingester: in, Logger: log, Security: BrokerSecurity{Passwords: kitchenPasswords(t), Routes: own}})
	if err != nil {
		t.Fatal(err)
	}
	cl := &mqtt.Client{ID: "kitchen-1"}
	cl.Net.Listener, cl.Net.Remote = "tcp", "192.0.2.1:40000"
	var connect packets.Packet
	connect.Connect.Username, connect.Connect.Password = []byte("kitchen"), []byte("pw")
	if !b.guard.OnConnectAuthenticate(cl, connect) {
		t.Fatal("kitchen refused")
	}
	// QoS 2: the ingest hook returns once the message is stored.
	pub := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 2}, TopicName: "sensors/kitchen/bulk",
		Payload: []byte(`{"device":"garage","t":1}`)}
	if !b.guard.OnACLCheck(cl, pub.TopicName, true) {
		t.Fatal("kitchen may not publish to its own topic")
	}
	b.SetRoutes(bulk, nil)
	if _, err := b.hook.OnPublish(cl, pub); err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, s := range store.SeriesList() {
		devices = append(devices, s.Device+"/"+s.Metric)
	}
	if strings.Join(devices, ",") != "kitchen/t" {
		t.Errorf("series stored: %q, want kitchen/t: the message was judged by the routes in which the topic names the device", devices)
	}
	if b.guard.OnACLCheck(cl, pub.TopicName, true) {
		t.Error("after SetRoutes, kitchen may publish to a topic whose payload names the device")
	}
}
