package gateway

import (
	"reflect"
	"strings"
	"testing"
)

func TestFilterCovers(t *testing.T) {
	cases := []struct {
		f, sub string
		want   bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b", true},
		{"a/+", "a", false},
		{"a/+", "a/b/c", false},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"a/#", "a/+", true},
		{"a/#", "a/#", true},
		{"a/+", "a/+", true},
		{"a/+", "a/#", false},
		{"a/b", "a/+", false},
		{"a/b", "a/#", false},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/b", "$SYS/b", false},
		{"$SYS/#", "$SYS/x", true},
		{"sensors/kitchen/telemetry", "sensors/kitchen/telemetry/x", false},
		{"a//b", "a//b", true},
		{"a/+/b", "a//b", true},
		{"", "", true},
		{"a", "", false},
	}
	for _, c := range cases {
		if got := filterCovers(c.f, c.sub); got != c.want {
			t.Errorf("filterCovers(%q, %q) = %v, want %v", c.f, c.sub, got, c.want)
		}
	}
}

func TestParseACL(t *testing.T) {
	acl, err := ParseACL([]byte("# everyone\nread public/#\n\nuser dashboard\nread sensors/#\nuser bridge\nreadwrite zigbee/{username}/#\nwrite zigbee/+/set\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(acl.All) != 1 || acl.All[0] != (ACLRule{Read, "public/#"}) {
		t.Errorf("rules for all: %+v", acl.All)
	}
	if got := acl.ByUser["bridge"]; len(got) != 2 || got[0] != (ACLRule{ReadWrite, "zigbee/{username}/#"}) || got[1].Access != Write {
		t.Errorf("rules of bridge: %+v", got)
	}
	for _, c := range []struct{ in, want string }{
		{"read", "line 1: want"},
		{"publish a/b", `line 1: unknown keyword "publish"`},
		{"read a/#/b", `"#" must be the last level`},
		{"read a/b+", "must be a whole level"},
		{"read a/{user}", "must be a whole level"},
		{"\nuser a/b", `line 2: user "a/b": not a valid user name`},
		{"read " + strings.Repeat("a/", MaxTopicLevels) + "a", "more than 32 levels"},
	} {
		if _, err := ParseACL([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseACL(%.30q): %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestRulesFor(t *testing.T) {
	p1, err := ParsePattern("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := ParsePattern("home/{metric}/{device}")
	if err != nil {
		t.Fatal(err)
	}
	p3, err := ParsePattern("bridge/#")
	if err != nil {
		t.Fatal(err)
	}
	defaults := defaultRules([]Route{{Pattern: p1}, {Pattern: p2}, {Pattern: p3}})
	acl, err := ParseACL([]byte("read status/{username}\nuser dash\nread sensors/#\n"))
	if err != nil {
		t.Fatal(err)
	}
	kitchen := rulesFor("kitchen", defaults, acl)
	dash := rulesFor("dash", defaults, acl)
	for _, c := range []struct {
		u           *userRules
		name, topic string
		write       bool
	}{
		{kitchen, "own topic", "sensors/kitchen/telemetry", true},
		{kitchen, "own metric topic", "home/temp/kitchen", true},
		{kitchen, "another device", "sensors/garage/telemetry", false},
		{kitchen, "another device's metric", "home/temp/garage", false},
		{kitchen, "pattern without {device}", "bridge/kitchen", false},
		{kitchen, "a level deeper", "sensors/kitchen/telemetry/x", false},
		{dash, "dash's own", "sensors/dash/telemetry", true},
	} {
		if got := c.u.canWrite(c.topic); got != c.write {
			t.Errorf("%s: canWrite(%q) = %v, want %v", c.name, c.topic, got, c.write)
		}
	}
	for _, c := range []struct {
		u      *userRules
		filter string
		want   bool
	}{
		{kitchen, "sensors/kitchen/telemetry", true},
		{kitchen, "sensors/+/telemetry", false},
		{kitchen, "sensors/#", false},
		{kitchen, "status/kitchen", true},
		{kitchen, "status/dash", false},
		{dash, "sensors/#", true},
		{dash, "sensors/kitchen/telemetry", true},
		{dash, "#", false},
	} {
		if got := c.u.canRead(c.filter); got != c.want {
			t.Errorf("canRead(%q) = %v, want %v", c.filter, got, c.want)
		}
	}
}

func TestParsePasswords(t *testing.T) {
	hash, err := HashPassword([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePasswords([]byte("# users\nkitchen:" + hash + "\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, password    string
		wantOK, wantKnown bool
	}{
		{"kitchen", "s3cret", true, true},
		{"kitchen", "s3cret", true, true}, // remembered
		{"kitchen", "S3cret", false, true},
		{"kitchen", "", false, true},
		{"garage", "s3cret", false, false},
	} {
		ok, known := p.Check(c.user, []byte(c.password))
		if ok != c.wantOK || known != c.wantKnown {
			t.Errorf("Check(%q, %q) = %v, %v; want %v, %v", c.user, c.password, ok, known, c.wantOK, c.wantKnown)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"kitchen", "line 1: want user:hash"},
		{"kitchen:plaintext", `line 1: user "kitchen": not a bcrypt hash`},
		{"a b:" + hash, `user "a b": not a valid user name`},
		{"k:" + hash + "\nk:" + hash, `line 2: user "k" appears twice`},
	} {
		_, err := ParsePasswords([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePasswords(%.20q): %v, want an error with %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "$2a$") {
			t.Errorf("error shows a hash: %v", err)
		}
	}
	if _, err := HashPassword(make([]byte, 73)); err == nil {
		t.Error("HashPassword of 73 bytes: no error (bcrypt ignores what is beyond 72)")
	}
}

// TestDefaultRules_Presets opens a device's own topics of the patterns
// whose device is one level, skipped traffic such as its last will
// included, and none of a bridge's.
func TestDefaultRules_Presets(t *testing.T) {
	var routes []Route
	for _, name := range []string{"tasmota", "zigbee2mqtt", "shelly", "homeassistant-statestream"} {
		rs, err := PresetRoutes(name, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, rs...)
	}
	var got []string
	for _, r := range defaultRules(routes) {
		got = append(got, r.Filter)
	}
	want := []string{
		"tele/{username}/LWT", "tele/{username}/SENSOR", "tele/{username}/STATE", "stat/{username}/STATUS10", "stat/{username}/STATUS8", "stat/{username}/+", "tele/{username}/+",
		"shellies/{username}/online", "shellies/{username}/announce", "shellies/{username}/info", "shellies/{username}/command", "shellies/{username}/#",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default rules:\n got %q\nwant %q", got, want)
	}
}

// defaultRules are the rules every authenticated client has: read and write
// on the topics of each route that is a user's own (ownFilter), where the
// device is the client's user name.
func defaultRules(routes []Route) []ACLRule {
	return newPolicy(routes, nil).defaults
}

// TestDefaultRules_PayloadDevices opens to no user a topic whose payload
// may name another device.
func TestDefaultRules_PayloadDevices(t *testing.T) {
	for _, name := range []string{"openmqttgateway", "telegraf"} {
		rs, err := PresetRoutes(name, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, rule := range defaultRules(rs) {
			if strings.Contains(rule.Filter, "BTtoMQTT") || strings.HasPrefix(rule.Filter, "telegraf/") {
				t.Errorf("%s: default rule %s opens a topic whose payload names the device", name, rule.Filter)
			}
		}
	}
}

func TestValidAccount(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"plug-1", true}, {"aa:bb", true}, {"a b", false}, {"a/b", false}, {"é", false}, {"", false}, {"..", false},
		{strings.Repeat("a", 64), true}, {strings.Repeat("a", 65), false},
	} {
		if ValidAccount(tc.s) != tc.ok {
			t.Errorf("ValidAccount(%q) = %v, want %v", tc.s, !tc.ok, tc.ok)
		}
	}
}
