package uplink

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// InfluxV2URL returns the URL that writes line protocol into bucket of
// org with InfluxDB 2.x's API: server's /api/v2/write with org, bucket
// and precision=ns (cairn's timestamps) in its query. server is the
// server's address, as InfluxDB's clients and Telegraf take it
// (http://host:8086, or with the path of a proxy in front), or already
// its /api/v2/write; its other query parameters stay. An empty org is
// left out: InfluxDB Cloud and 3.x take the token's. The error says what
// is wrong with server.
func InfluxV2URL(server, org, bucket string) (string, error) {
	if bucket == "" {
		return "", errors.New("no bucket")
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	path := strings.TrimSuffix(u.Path, "/")
	switch {
	case strings.HasSuffix(path, "/api/v2/write"):
	case strings.HasSuffix(path, "/write"), strings.HasSuffix(path, "/api/v2"), strings.HasSuffix(path, "/api/v1/write"):
		return "", fmt.Errorf("with a bucket, give the server's address, such as %s://%s, and cairn posts to its /api/v2/write (got %q)", u.Scheme, u.Host, server)
	default:
		path += "/api/v2/write"
	}
	q := u.Query()
	for k := range q {
		switch strings.ToLower(k) {
		case "org", "orgid", "bucket", "bucketid", "precision", "db":
			return "", fmt.Errorf("holds %q: with a bucket, cairn sets org, bucket and precision itself (got %q)", k, server)
		}
	}
	if org != "" {
		q.Set("org", org)
	}
	q.Set("bucket", bucket)
	q.Set("precision", "ns")
	u.Path, u.RawPath, u.RawQuery = path, "", q.Encode()
	return u.String(), nil
}
