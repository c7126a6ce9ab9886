package buffer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// keyKind is the first byte of every key and names its keyspace.
// Byte order of keys within a keyspace is the order queries need.
type keyKind byte

const (
	// kindPoint holds one reading of an open bucket:
	//   'p' device 0x00 metric 0x00 ts(8B BE) valueBits(8B BE) → empty value.
	// The value is part of the key, so the same reading written twice is the
	// same key (redelivery is idempotent) while two readings of one series
	// with the same timestamp and different values are two keys.
	kindPoint keyKind = 'p'
	// kindMeta holds store-wide values under a name: '_' name → value.
	kindMeta keyKind = '_'
)

// sep separates the variable-length parts of a key. Device ids and metric
// names never contain it (see ValidName).
const sep = 0x00

// pointKeyFixed is the length of a point key's fixed-width tail.
const pointKeyFixed = 8 + 8

// Meta names.
const (
	metaSchema   = "schema"   // uint64 BE: keyspace version
	metaReadings = "readings" // uint64 BE: distinct readings stored
)

// schemaVersion is the version of the keyspace written by this code.
const schemaVersion = 1

// errBadKey is wrapped by every key parser.
var errBadKey = errors.New("bad key")

// appendSeriesPrefix appends 'p' device 0x00 metric 0x00 to dst. With an
// empty metric it appends only 'p' device 0x00, the prefix of every series of
// the device.
func appendSeriesPrefix(dst []byte, device, metric string) []byte {
	dst = append(dst, byte(kindPoint))
	dst = append(dst, device...)
	dst = append(dst, sep)
	if metric == "" {
		return dst
	}
	dst = append(dst, metric...)
	return append(dst, sep)
}

// appendPointKey appends the point key of r to dst.
func appendPointKey(dst []byte, r Reading) []byte {
	dst = appendSeriesPrefix(dst, r.Device, r.Metric)
	dst = appendTS(dst, r.TS)
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(r.Value))
}

// appendTS appends ts as 8 big-endian bytes with the sign bit flipped, so
// that byte order is time order for every int64, before 1970 included.
func appendTS(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
}

func decodeTS(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

// parsePointKey parses a key written by appendPointKey. The strings it
// returns are copies; the key may be reused.
func parsePointKey(k []byte) (Reading, error) {
	if len(k) < 1+2+pointKeyFixed || keyKind(k[0]) != kindPoint {
		return Reading{}, fmt.Errorf("%w: not a point key (%d bytes)", errBadKey, len(k))
	}
	head, tail := k[1:len(k)-pointKeyFixed], k[len(k)-pointKeyFixed:]
	i := bytes.IndexByte(head, sep)
	if i < 1 || len(head) < i+3 || head[len(head)-1] != sep {
		return Reading{}, fmt.Errorf("%w: point key without device and metric", errBadKey)
	}
	metric := head[i+1 : len(head)-1]
	if len(metric) == 0 || bytes.IndexByte(metric, sep) >= 0 {
		return Reading{}, fmt.Errorf("%w: point key with bad metric", errBadKey)
	}
	return Reading{
		Device: string(head[:i]),
		Metric: string(metric),
		TS:     decodeTS(tail[:8]),
		Value:  math.Float64frombits(binary.BigEndian.Uint64(tail[8:])),
	}, nil
}

// appendMetaKey appends the key of the meta value name to dst.
func appendMetaKey(dst []byte, name string) []byte {
	dst = append(dst, byte(kindMeta))
	return append(dst, name...)
}

func appendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }
