package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun_Version: `cairn version` names the Badger release built in and
// counts its patches, as third_party/badger/UPSTREAM and patches/ have
// them; the binary's build info does not list Badger.
func TestRun_Version(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, io.Discard); err != nil {
		t.Fatalf("cairn version: %v", err)
	}
	upstream, err := os.ReadFile("../../third_party/badger/UPSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for line := range strings.Lines(string(upstream)) {
		if f := strings.Fields(line); len(f) == 2 {
			fields[f[0]] = f[1]
		}
	}
	patches, err := filepath.Glob("../../third_party/badger/patches/*.patch")
	if err != nil || len(patches) == 0 {
		t.Fatalf("patches of third_party/badger: got %d, %v", len(patches), err)
	}
	want := fmt.Sprintf("badger %s %s plus %d patches", fields["module"], fields["version"], len(patches))
	if !strings.Contains(out.String(), want) {
		t.Errorf("cairn version: got %q, want %q in it", out.String(), want)
	}
}
