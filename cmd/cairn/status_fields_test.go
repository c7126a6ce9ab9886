package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// documentedStatusKeys reads the keys of /v1/status that README.md's
// table of endpoints documents, by object: "" for the top level. A
// name in parentheses is a note, or a key of a list's elements, and is
// left out.
func documentedStatusKeys(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `GET /v1/status` |") {
			row = strings.TrimPrefix(l, "| `GET /v1/status` |")
		}
	}
	if row == "" {
		t.Fatal("README.md has no row for GET /v1/status")
	}
	var top strings.Builder
	depth := 0
	for _, c := range row {
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0:
			top.WriteRune(c)
		}
	}
	keys := map[string][]string{}
	object := ""
	for _, m := range regexp.MustCompile("`([a-z_]+)`( *:)?").FindAllStringSubmatch(top.String(), -1) {
		if m[2] != "" {
			object = m[1]
			keys[""] = append(keys[""], object)
			continue
		}
		keys[object] = append(keys[object], m[1])
	}
	return keys
}

// TestStatus_DocumentedFieldsPresent decodes /v1/status of a fresh
// gateway, which has refused nothing, sent nothing and found no file
// that is not its own, and checks that every key README.md documents is
// there and that it serves no other, and that none of its lists or maps is null.
func TestStatus_DocumentedFieldsPresent(t *testing.T) {
	documented := documentedStatusKeys(t)
	for _, obj := range []string{"", "mqtt", "ingest", "store", "uplink", "retention", "clock"} {
		if len(documented[obj]) == 0 {
			t.Fatalf("README.md documents no key of %q in /v1/status: %v", obj, documented)
		}
	}
	// An uplink to where nothing listens: with nothing stored, it has
	// nothing to send and no error to tell.
	cfg := localConfig + fmt.Sprintf("uplink:\n  url: http://127.0.0.1:%d/write\n", freePort(t))
	d := startDaemon(t, writeConfig(t, t.TempDir(), cfg))
	api := newAPIClient(d.http)
	var doc map[string]json.RawMessage
	if code := api.get(t, "/v1/status", &doc); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d", code)
	}
	objects := map[string]map[string]json.RawMessage{"": doc}
	for obj := range documented {
		if obj == "" {
			continue
		}
		var m map[string]json.RawMessage
		if raw, ok := doc[obj]; ok {
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s: %v: %s", obj, err, raw)
			}
		}
		objects[obj] = m
	}
	for obj, keys := range documented {
		for _, k := range keys {
			raw, ok := objects[obj][k]
			name := strings.TrimPrefix(obj+"."+k, ".")
			switch {
			case !ok:
				t.Errorf("/v1/status has no %s, which README.md documents", name)
			case string(raw) == "null" && listOrMap(obj, k):
				t.Errorf("/v1/status: %s is null, want an empty list or map", name)
			}
		}
	}
	for obj, m := range objects {
		for k := range m {
			if !slices.Contains(documented[obj], k) {
				t.Errorf("/v1/status serves %s, which README.md does not document", strings.TrimPrefix(obj+"."+k, "."))
			}
		}
	}
	var st struct {
		MQTT struct {
			Clients *int64 `json:"clients"`
		} `json:"mqtt"`
	}
	if err := json.Unmarshal(mustJSON(t, doc), &st); err != nil || st.MQTT.Clients == nil || *st.MQTT.Clients != 0 {
		t.Errorf("mqtt.clients of a fresh gateway: %v (%v), want 0", st.MQTT.Clients, err)
	}
	t.Logf("checked %d objects' documented keys: %v", len(documented), documented)
}

// listOrMap reports whether the status key obj.k is a list or a map,
// which an empty gateway serves as [] or {}.
func listOrMap(obj, k string) bool {
	return slices.Contains([]string{
		"mqtt.refused_by_reason", "ingest.rejected_by_reason", "ingest.recent_rejections",
		"ingest.recent_unmatched", "ingest.skipped", "store.foreign_files", "clock.untrusted_spans",
	}, obj+"."+k)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
