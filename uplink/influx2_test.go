package uplink

import (
	"strings"
	"testing"
)

func TestInfluxV2URL(t *testing.T) {
	for _, tc := range []struct {
		server, org, bucket string
		want                string // "error: …" for an error that holds …
	}{
		{"http://db:8086", "acme", "sensors", "http://db:8086/api/v2/write?bucket=sensors&org=acme&precision=ns"},
		{"http://db:8086/", "acme", "sensors", "http://db:8086/api/v2/write?bucket=sensors&org=acme&precision=ns"},
		{"https://eu-central-1-1.aws.cloud2.influxdata.com", "", "sensors", "https://eu-central-1-1.aws.cloud2.influxdata.com/api/v2/write?bucket=sensors&precision=ns"},
		{"http://db:8086/api/v2/write", "acme", "sensors", "http://db:8086/api/v2/write?bucket=sensors&org=acme&precision=ns"},
		{"https://proxy/influx", "my org", "a/b&c", "https://proxy/influx/api/v2/write?bucket=a%2Fb%26c&org=my+org&precision=ns"},
		{"http://vm:8428/influx?extra_label=site%3Dnorth", "", "x", "http://vm:8428/influx/api/v2/write?bucket=x&extra_label=site%3Dnorth&precision=ns"},
		{"http://db:8086/write", "acme", "sensors", `error: with a bucket, give the server's address, such as http://db:8086, and cairn posts to its /api/v2/write (got "http://db:8086/write")`},
		{"http://db:8086/api/v2", "acme", "sensors", "error: give the server's address"},
		{"http://db:8086/api/v2/write?bucket=x", "acme", "sensors", `error: holds "bucket": with a bucket, cairn sets org, bucket and precision itself`},
		{"http://db:8086/api/v2/write?precision=s", "", "sensors", `error: holds "precision"`},
		{"http://db:8086", "acme", "", "error: no bucket"},
	} {
		got, err := InfluxV2URL(tc.server, tc.org, tc.bucket)
		if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("InfluxV2URL(%q, %q, %q): got %q, %v; want an error with %q", tc.server, tc.org, tc.bucket, got, err, want)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("InfluxV2URL(%q, %q, %q):\n got %q, %v\nwant %q", tc.server, tc.org, tc.bucket, got, err, tc.want)
		}
	}
}
