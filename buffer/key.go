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
	// kindPoint holds a run of open (not yet sealed) readings of one
	// series-day, keyed by its first (see open.go):
	//   'p' device 0x00 metric 0x00 ts(8B BE) valueBits(8B BE) → empty value
	// for a run of that one reading, else the run encoded as a bucket. The
	// first reading's value is part of the key, so two readings of one
	// series with the same timestamp and different values start two keys.
	kindPoint keyKind = 'p'
	// kindBucket holds a sealed bucket: up to N readings of one series
	// within one UTC day, encoded by appendBucket:
	//   'b' device 0x00 metric 0x00 day(4B BE) firstTS(8B BE) → bucket.
	// Buckets of a series never overlap in time (equal timestamps may
	// straddle two), so key order is time order, and a series-day is a
	// prefix that can be dropped whole.
	kindBucket keyKind = 'b'
	// kindMinute, kindHour and kindDay hold the _stats of a series' readings
	// in one UTC minute, hour or day (see stats.go):
	//   'm' | 'h' | 'd' device 0x00 metric 0x00 start(8B BE) → aggregate.Stats
	kindMinute keyKind = 'm'
	kindHour   keyKind = 'h'
	kindDay    keyKind = 'd'
	// kindJournal holds the readings of one group commit until a
	// checkpoint writes them as runs and aggregates (see journal.go):
	//   'j' seq(8B BE) → the readings, encoded as an outbox entry.
	kindJournal keyKind = 'j'
	// kindUnit holds the unit of a series, the last one a stored reading
	// brought (see unit.go); a series whose unit is not known has none:
	//   'u' device 0x00 metric 0x00 → the unit, 1 to MaxUnitLen bytes of
	//   UTF-8 without control characters.
	kindUnit keyKind = 'u'
	// kindMeta holds store-wide values under a name: '_' name → value.
	kindMeta keyKind = '_'
)

// sep separates the variable-length parts of a key. Device ids and metric
// names never contain it (see CheckName).
const sep = 0x00

// pointKeyFixed is the length of a point key's fixed-width tail.
const pointKeyFixed = 8 + 8

// Meta names.
const (
	metaSchema   = "schema"   // uint64 BE: keyspace version
	metaReadings = "readings" // uint64 BE: distinct readings stored
	// metaUncompacted counts the readings deleted since the store was last
	// compacted (uint64 BE).
	metaUncompacted = "uncompacted"
)

// schemaVersion is the version of the keyspace written by this code.
// Version 4 moved the outbox before every other kind (moveOutbox); version
// 3 added the journal; version 2 added runs of points; version 1 had a
// point per reading, and recorded no version.
const schemaVersion = 4

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

// bucketKeyFixed is the length of a bucket key's fixed-width tail.
const bucketKeyFixed = 4 + 8 + 8

// nanosPerDay is the length of a UTC day in nanoseconds.
const nanosPerDay = 24 * 60 * 60 * 1e9

// dayOf returns the UTC day of ts, counted from the epoch (negative before
// 1970).
func dayOf(ts int64) int32 {
	d := ts / nanosPerDay
	if ts%nanosPerDay < 0 {
		d--
	}
	return int32(d)
}

// appendDay appends day as 4 big-endian bytes with the sign bit flipped.
func appendDay(dst []byte, day int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(day)^(1<<31))
}

// appendBucketPrefix appends the prefix of every bucket of a series.
func appendBucketPrefix(dst []byte, device, metric string) []byte {
	dst = append(dst, byte(kindBucket))
	dst = append(dst, device...)
	dst = append(dst, sep)
	dst = append(dst, metric...)
	return append(dst, sep)
}

// appendBucketKey appends the key of the bucket of a series whose first
// sample is first. The first sample's value is part of the key, as in
// point keys, so that two buckets never share a key even when more than
// a bucket's worth of readings share one timestamp.
func appendBucketKey(dst []byte, device, metric string, first Sample) []byte {
	dst = appendBucketPrefix(dst, device, metric)
	return appendBucketTail(dst, first)
}

// appendBucketTail appends the fixed-width part of a bucket key.
func appendBucketTail(dst []byte, first Sample) []byte {
	dst = appendDay(dst, dayOf(first.TS))
	dst = appendTS(dst, first.TS)
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(first.Value))
}

// parseBucketTail parses the fixed-width tail of a bucket key: the first
// sample of the bucket.
func parseBucketTail(k []byte) (Sample, error) {
	if len(k) < bucketKeyFixed {
		return Sample{}, fmt.Errorf("%w: bucket key of %d bytes", errBadKey, len(k))
	}
	tail := k[len(k)-bucketKeyFixed:]
	first := Sample{
		TS:    decodeTS(tail[4:12]),
		Value: math.Float64frombits(binary.BigEndian.Uint64(tail[12:])),
	}
	if !bytes.Equal(appendDay(nil, dayOf(first.TS)), tail[:4]) {
		return Sample{}, fmt.Errorf("%w: bucket key day does not hold its first reading", errBadKey)
	}
	return first, nil
}

// parseBucketKey parses a key written by appendBucketKey.
func parseBucketKey(k []byte) (device, metric string, first Sample, err error) {
	if len(k) < 1+4+bucketKeyFixed || keyKind(k[0]) != kindBucket {
		return "", "", Sample{}, fmt.Errorf("%w: not a bucket key (%d bytes)", errBadKey, len(k))
	}
	head := k[1 : len(k)-bucketKeyFixed]
	i := bytes.IndexByte(head, sep)
	if i < 1 || len(head) < i+3 || head[len(head)-1] != sep {
		return "", "", Sample{}, fmt.Errorf("%w: bucket key without device and metric", errBadKey)
	}
	m := head[i+1 : len(head)-1]
	if len(m) == 0 || bytes.IndexByte(m, sep) >= 0 {
		return "", "", Sample{}, fmt.Errorf("%w: bucket key with bad metric", errBadKey)
	}
	first, err = parseBucketTail(k)
	if err != nil {
		return "", "", Sample{}, err
	}
	return string(head[:i]), string(m), first, nil
}

// parsePointTail parses the fixed-width tail of a point key.
func parsePointTail(k []byte) Sample {
	tail := k[len(k)-pointKeyFixed:]
	return Sample{TS: decodeTS(tail[:8]), Value: math.Float64frombits(binary.BigEndian.Uint64(tail[8:]))}
}

// less reports whether a sorts before b in a series: by time, then by the
// value's bits, the order of point keys.
func (a Sample) less(b Sample) bool {
	if a.TS != b.TS {
		return a.TS < b.TS
	}
	return math.Float64bits(a.Value) < math.Float64bits(b.Value)
}

// same reports whether a and b are the same sample, bit for bit.
func (a Sample) same(b Sample) bool {
	return a.TS == b.TS && math.Float64bits(a.Value) == math.Float64bits(b.Value)
}

// appendUnitKey appends the key of the unit of a series to dst.
func appendUnitKey(dst []byte, device, metric string) []byte {
	dst = append(dst, byte(kindUnit))
	dst = append(dst, device...)
	dst = append(dst, sep)
	dst = append(dst, metric...)
	return append(dst, sep)
}

// parseUnitKey parses a key written by appendUnitKey. The strings it
// returns are copies; the key may be reused.
func parseUnitKey(k []byte) (device, metric string, err error) {
	if len(k) < 1+4 || keyKind(k[0]) != kindUnit || k[len(k)-1] != sep {
		return "", "", fmt.Errorf("%w: not a unit key (%d bytes)", errBadKey, len(k))
	}
	head := k[1 : len(k)-1]
	i := bytes.IndexByte(head, sep)
	if i < 1 || i == len(head)-1 || bytes.IndexByte(head[i+1:], sep) >= 0 {
		return "", "", fmt.Errorf("%w: unit key without device and metric", errBadKey)
	}
	return string(head[:i]), string(head[i+1:]), nil
}

// appendMetaKey appends the key of the meta value name to dst.
func appendMetaKey(dst []byte, name string) []byte {
	dst = append(dst, byte(kindMeta))
	return append(dst, name...)
}

func appendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }
