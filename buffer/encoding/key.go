package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/cairn-gateway/cairn/aggregate"
)

// KeyKind is the first byte of every key and names its keyspace.
// Byte order of keys within a keyspace is the order queries need.
type KeyKind byte

const (
	// KindOutbox holds the readings of one group commit for the uplink,
	// until they are sent (OutboxEncoder):
	//   'O' firstSeq(8B BE) → an outbox entry.
	// It sorts before every other kind (keyspace version 4).
	KindOutbox KeyKind = 'O'
	// KindOutboxV3 is where keyspace versions 1 to 3 kept the outbox; a
	// store of version 4 moves what it finds there to KindOutbox.
	KindOutboxV3 KeyKind = 'o'
	// KindPoint holds a run of open (not yet sealed) readings of one
	// series-day, keyed by its first (AppendRun):
	//   'p' device 0x00 metric 0x00 ts(8B BE) valueBits(8B BE) → empty value
	// for a run of that one reading, else the run encoded as a bucket. The
	// first reading's value is part of the key, so two readings of one
	// series with the same timestamp and different values start two keys.
	KindPoint KeyKind = 'p'
	// KindBucket holds a sealed bucket: up to N readings of one series
	// within one UTC day, encoded by AppendBucket:
	//   'b' device 0x00 metric 0x00 day(4B BE) firstTS(8B BE) firstValueBits(8B BE) → bucket.
	// Buckets of a series never overlap in time (equal timestamps may
	// straddle two), so key order is time order, and a series-day is a
	// prefix that can be dropped whole.
	KindBucket KeyKind = 'b'
	// KindMinute, KindHour and KindDay hold the _stats of a series' readings
	// in one UTC minute, hour or day (StatsKind):
	//   'm' | 'h' | 'd' device 0x00 metric 0x00 start(8B BE) → aggregate.Stats
	// The value is aggregate.Stats' own encoding (Stats.Append,
	// aggregate.Decode).
	KindMinute KeyKind = 'm'
	KindHour   KeyKind = 'h'
	KindDay    KeyKind = 'd'
	// KindJournal held, in keyspace version 4 and older, the readings of
	// one group commit until a checkpoint wrote them as runs and
	// aggregates (the log, KindOutbox, does that now; Open replays and
	// deletes what an older store left):
	//   'j' seq(8B BE) → the readings, encoded as an outbox entry.
	KindJournal KeyKind = 'j'
	// KindUnit holds the unit of a series, the last one a stored reading
	// brought; a series whose unit is not known has none:
	//   'u' device 0x00 metric 0x00 → the unit, 1 to MaxUnitLen bytes of
	//   UTF-8 without control characters (ValidUnit).
	KindUnit KeyKind = 'u'
	// KindText holds the dictionary of a text series: each text its
	// readings hold, under the id that its points and buckets hold as
	// their value (float64(id)), numbered from 0 in the order the store
	// first met them, never reused. A number series has none:
	//   't' device 0x00 metric 0x00 id(4B BE) → the text, 1 to MaxText
	//   bytes (ValidText).
	KindText KeyKind = 't'
	// KindHeard holds when cairn last heard from a device, by its own
	// clock (to the minute: it is written when it moves by one):
	//   's' device 0x00 → the time, 8 bytes as AppendTS writes it.
	KindHeard KeyKind = 's'
	// KindMeta holds store-wide values under a name: '_' name → value.
	KindMeta KeyKind = '_'
)

// Sep separates the variable-length parts of a key. Device ids and metric
// names never contain it: the store takes only names that CheckDevice and
// CheckMetric accept.
const Sep = 0x00

// PointKeyFixed is the length of a point key's fixed-width tail: the
// first reading's timestamp and value bits.
const PointKeyFixed = 8 + 8

// Meta names of the values this package describes. The store keeps a few
// more of its own (the clock's spans, the flush marker, the disk cap),
// each beside the code that writes it.
const (
	MetaSchema   = "schema"   // uint64 BE: keyspace version (SchemaVersion)
	MetaReadings = "readings" // uint64 BE: distinct readings stored
	// MetaUncompacted counts the readings deleted since the store was last
	// compacted (uint64 BE).
	MetaUncompacted = "uncompacted"
	// MetaOutbox is the uplink's cursor and the batch in flight
	// (AppendOutboxMeta) in a store of version 4 and older, which had one
	// upstream; the first upstream a newer store is asked for takes it
	// over (MetaCursor).
	MetaOutbox = "outbox"
	// MetaDropped counts the readings dropped from the outbox unsent
	// (uint64 BE), in a store of version 4 and older.
	MetaDropped = "dropped_unsent"
	// MetaCursor, followed by an upstream's name, is where that upstream
	// stands in the log (AppendCursorMeta).
	MetaCursor = "cursor:"
	// MetaCheckpoint is the checkpoint's cursor in the log (uint64 BE):
	// the readings before it are in runs and records.
	MetaCheckpoint = "checkpoint"
)

// SchemaVersion is the version of the keyspace written by this code.
// Version 5 made the outbox the one log of every commit, with a cursor
// per upstream and one for the checkpoint, and left the journal; version 4 moved the outbox before every other kind (KindOutbox); version
// 3 added the journal; version 2 added runs of points; version 1 had a
// point per reading, and recorded no version.
//
// Version 6 added text series: their dictionaries (KindText), and outbox
// entries of version 2 (OutboxV2), which an older cairn cannot read.
const SchemaVersion = 6

// ErrBadKey is wrapped by every error a key parser returns.
var ErrBadKey = errors.New("bad key")

// AppendSeriesPrefix appends 'p' device 0x00 metric 0x00 to dst. With an
// empty metric it appends only 'p' device 0x00, the prefix of every series of
// the device.
func AppendSeriesPrefix(dst []byte, device, metric string) []byte {
	if metric == "" {
		return append(append(append(dst, byte(KindPoint)), device...), Sep)
	}
	return appendSeries(dst, byte(KindPoint), device, metric)
}

// AppendPointKey appends the point key of r to dst.
func AppendPointKey(dst []byte, r Reading) []byte {
	dst = AppendSeriesPrefix(dst, r.Device, r.Metric)
	dst = AppendTS(dst, r.TS)
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(r.Value))
}

// AppendTS appends ts as 8 big-endian bytes with the sign bit flipped, so
// that byte order is time order for every int64, before 1970 included.
func AppendTS(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
}

func DecodeTS(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

// ParsePointKey parses a key written by AppendPointKey. The strings it
// returns are copies; the key may be reused.
func ParsePointKey(k []byte) (Reading, error) {
	if len(k) < 1+2+PointKeyFixed || KeyKind(k[0]) != KindPoint {
		return Reading{}, fmt.Errorf("%w: not a point key (%d bytes)", ErrBadKey, len(k))
	}
	head, tail := k[1:len(k)-PointKeyFixed], k[len(k)-PointKeyFixed:]
	i := bytes.IndexByte(head, Sep)
	if i < 1 || len(head) < i+3 || head[len(head)-1] != Sep {
		return Reading{}, fmt.Errorf("%w: point key without device and metric", ErrBadKey)
	}
	metric := head[i+1 : len(head)-1]
	if len(metric) == 0 || bytes.IndexByte(metric, Sep) >= 0 {
		return Reading{}, fmt.Errorf("%w: point key with bad metric", ErrBadKey)
	}
	return Reading{
		Device: string(head[:i]),
		Metric: string(metric),
		TS:     DecodeTS(tail[:8]),
		Value:  math.Float64frombits(binary.BigEndian.Uint64(tail[8:])),
	}, nil
}

// bucketKeyFixed is the length of a bucket key's fixed-width tail.
const bucketKeyFixed = 4 + 8 + 8

// NanosPerDay is the length of a UTC day in nanoseconds.
const NanosPerDay = 24 * 60 * 60 * 1e9

// DayOf returns the UTC day of ts, counted from the epoch (negative before
// 1970).
func DayOf(ts int64) int32 {
	d := ts / NanosPerDay
	if ts%NanosPerDay < 0 {
		d--
	}
	return int32(d)
}

// AppendDay appends day as 4 big-endian bytes with the sign bit flipped.
func AppendDay(dst []byte, day int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(day)^(1<<31))
}

// appendSeries appends kind device 0x00 metric 0x00: the start of every
// key of a series.
func appendSeries(dst []byte, kind byte, device, metric string) []byte {
	dst = append(dst, kind)
	dst = append(dst, device...)
	dst = append(dst, Sep)
	dst = append(dst, metric...)
	return append(dst, Sep)
}

// AppendBucketPrefix appends the prefix of every bucket of a series.
func AppendBucketPrefix(dst []byte, device, metric string) []byte {
	return appendSeries(dst, byte(KindBucket), device, metric)
}

// AppendBucketKey appends the key of the bucket of a series whose first
// sample is first. The first sample's value is part of the key, as in
// point keys, so that two buckets never share a key even when more than
// a bucket's worth of readings share one timestamp.
func AppendBucketKey(dst []byte, device, metric string, first Sample) []byte {
	dst = AppendBucketPrefix(dst, device, metric)
	return AppendBucketTail(dst, first)
}

// AppendBucketTail appends the fixed-width part of a bucket key.
func AppendBucketTail(dst []byte, first Sample) []byte {
	dst = AppendDay(dst, DayOf(first.TS))
	dst = AppendTS(dst, first.TS)
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(first.Value))
}

// ParseBucketTail parses the fixed-width tail of a bucket key: the first
// sample of the bucket.
func ParseBucketTail(k []byte) (Sample, error) {
	if len(k) < bucketKeyFixed {
		return Sample{}, fmt.Errorf("%w: bucket key of %d bytes", ErrBadKey, len(k))
	}
	tail := k[len(k)-bucketKeyFixed:]
	first := Sample{
		TS:    DecodeTS(tail[4:12]),
		Value: math.Float64frombits(binary.BigEndian.Uint64(tail[12:])),
	}
	if !bytes.Equal(AppendDay(nil, DayOf(first.TS)), tail[:4]) {
		return Sample{}, fmt.Errorf("%w: bucket key day does not hold its first reading", ErrBadKey)
	}
	return first, nil
}

// ParseBucketKey parses a key written by AppendBucketKey.
func ParseBucketKey(k []byte) (device, metric string, first Sample, err error) {
	if len(k) < 1+4+bucketKeyFixed || KeyKind(k[0]) != KindBucket {
		return "", "", Sample{}, fmt.Errorf("%w: not a bucket key (%d bytes)", ErrBadKey, len(k))
	}
	head := k[1 : len(k)-bucketKeyFixed]
	i := bytes.IndexByte(head, Sep)
	if i < 1 || len(head) < i+3 || head[len(head)-1] != Sep {
		return "", "", Sample{}, fmt.Errorf("%w: bucket key without device and metric", ErrBadKey)
	}
	m := head[i+1 : len(head)-1]
	if len(m) == 0 || bytes.IndexByte(m, Sep) >= 0 {
		return "", "", Sample{}, fmt.Errorf("%w: bucket key with bad metric", ErrBadKey)
	}
	first, err = ParseBucketTail(k)
	if err != nil {
		return "", "", Sample{}, err
	}
	return string(head[:i]), string(m), first, nil
}

// ParsePointTail parses the fixed-width tail of a point key: the first
// sample of its run. k must be at least PointKeyFixed bytes long, as every
// key is that ParsePointKey accepts or a point-prefixed iterator yields
// after checking its length.
func ParsePointTail(k []byte) Sample {
	tail := k[len(k)-PointKeyFixed:]
	return Sample{TS: DecodeTS(tail[:8]), Value: math.Float64frombits(binary.BigEndian.Uint64(tail[8:]))}
}

// AppendUnitKey appends the key of the unit of a series to dst.
func AppendUnitKey(dst []byte, device, metric string) []byte {
	return appendSeries(dst, byte(KindUnit), device, metric)
}

// ParseUnitKey parses a key written by AppendUnitKey. The strings it
// returns are copies; the key may be reused.
func ParseUnitKey(k []byte) (device, metric string, err error) {
	if len(k) < 1+4 || KeyKind(k[0]) != KindUnit || k[len(k)-1] != Sep {
		return "", "", fmt.Errorf("%w: not a unit key (%d bytes)", ErrBadKey, len(k))
	}
	head := k[1 : len(k)-1]
	i := bytes.IndexByte(head, Sep)
	if i < 1 || i == len(head)-1 || bytes.IndexByte(head[i+1:], Sep) >= 0 {
		return "", "", fmt.Errorf("%w: unit key without device and metric", ErrBadKey)
	}
	return string(head[:i]), string(head[i+1:]), nil
}

// TextKeyFixed is the length of a text key's fixed-width tail: the id.
const TextKeyFixed = 4

// AppendTextKey appends the key of text id of a series' dictionary to dst.
func AppendTextKey(dst []byte, device, metric string, id uint32) []byte {
	return binary.BigEndian.AppendUint32(appendSeries(dst, byte(KindText), device, metric), id)
}

// AppendTextPrefix appends the prefix of the keys of a series'
// dictionary to dst.
func AppendTextPrefix(dst []byte, device, metric string) []byte {
	return appendSeries(dst, byte(KindText), device, metric)
}

// ParseTextKey parses a key written by AppendTextKey. The strings it
// returns are copies; the key may be reused.
func ParseTextKey(k []byte) (device, metric string, id uint32, err error) {
	if len(k) < 1+4+TextKeyFixed || KeyKind(k[0]) != KindText || k[len(k)-1-TextKeyFixed] != Sep {
		return "", "", 0, fmt.Errorf("%w: not a text key (%d bytes)", ErrBadKey, len(k))
	}
	head := k[1 : len(k)-1-TextKeyFixed]
	i := bytes.IndexByte(head, Sep)
	if i < 1 || i == len(head)-1 || bytes.IndexByte(head[i+1:], Sep) >= 0 {
		return "", "", 0, fmt.Errorf("%w: text key without device and metric", ErrBadKey)
	}
	return string(head[:i]), string(head[i+1:]), binary.BigEndian.Uint32(k[len(k)-TextKeyFixed:]), nil
}

// ValidText reports whether s can be the text of a reading: 1 to MaxText
// bytes of valid UTF-8 without 0x00.
func ValidText(s string) bool {
	return len(s) > 0 && len(s) <= MaxText && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// AppendHeardKey appends the key of the time device was last heard to dst.
func AppendHeardKey(dst []byte, device string) []byte {
	return append(append(append(dst, byte(KindHeard)), device...), Sep)
}

// ParseHeardKey parses a key written by AppendHeardKey. The string it
// returns is a copy; the key may be reused.
func ParseHeardKey(k []byte) (device string, err error) {
	if len(k) < 1+2 || KeyKind(k[0]) != KindHeard || k[len(k)-1] != Sep {
		return "", fmt.Errorf("%w: not a heard key (%d bytes)", ErrBadKey, len(k))
	}
	d := k[1 : len(k)-1]
	if bytes.IndexByte(d, Sep) >= 0 {
		return "", fmt.Errorf("%w: heard key with a separator in its device", ErrBadKey)
	}
	return string(d), nil
}

// AppendMetaKey appends the key of the meta value name to dst.
func AppendMetaKey(dst []byte, name string) []byte {
	dst = append(dst, byte(KindMeta))
	return append(dst, name...)
}

// AppendUint64 appends v as 8 big-endian bytes: the encoding of the meta
// values that are counts or versions.
func AppendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// AppendStatsPrefix appends the prefix of the records of one level of a
// series: 'm' | 'h' | 'd' device 0x00 metric 0x00.
func AppendStatsPrefix(dst []byte, level aggregate.Level, device, metric string) []byte {
	return appendSeries(dst, byte(StatsKind(level)), device, metric)
}

// AppendStatsKey appends the key of the record of a series at start, the
// start of its minute, hour or day.
func AppendStatsKey(dst []byte, level aggregate.Level, device, metric string, start int64) []byte {
	return AppendTS(AppendStatsPrefix(dst, level, device, metric), start)
}

// StatsKind returns the first byte of the keys of a level's records:
// KindMinute, KindHour or KindDay (for aggregate.Day and any other level).
func StatsKind(l aggregate.Level) KeyKind {
	switch l {
	case aggregate.Minute:
		return KindMinute
	case aggregate.Hour:
		return KindHour
	}
	return KindDay
}

// ParseStatsKey parses a key written by AppendStatsKey. The strings it
// returns are copies; the key may be reused.
func ParseStatsKey(k []byte) (level aggregate.Level, device, metric string, start int64, err error) {
	if len(k) < 1+4+8 {
		return 0, "", "", 0, fmt.Errorf("%w: not a stats key (%d bytes)", ErrBadKey, len(k))
	}
	switch KeyKind(k[0]) {
	case KindMinute:
		level = aggregate.Minute
	case KindHour:
		level = aggregate.Hour
	case KindDay:
		level = aggregate.Day
	default:
		return 0, "", "", 0, fmt.Errorf("%w: not a stats key (kind %q)", ErrBadKey, k[0])
	}
	head := k[1 : len(k)-8]
	i := bytes.IndexByte(head, Sep)
	if i < 1 || len(head) < i+3 || head[len(head)-1] != Sep {
		return 0, "", "", 0, fmt.Errorf("%w: stats key without device and metric", ErrBadKey)
	}
	m := head[i+1 : len(head)-1]
	if bytes.IndexByte(m, Sep) >= 0 {
		return 0, "", "", 0, fmt.Errorf("%w: stats key with bad metric", ErrBadKey)
	}
	return level, string(head[:i]), string(m), DecodeTS(k[len(k)-8:]), nil
}

// JournalKeyLen is the length of a journal key.
const JournalKeyLen = 1 + 8

// AppendJournalKey appends the key of the journal entry seq:
// 'j' seq(8B BE).
func AppendJournalKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, byte(KindJournal)), seq)
}

// ParseJournalKey parses a key written by AppendJournalKey.
func ParseJournalKey(k []byte) (seq uint64, err error) {
	return parseSeqKey(k, KindJournal)
}

// OutboxKeyLen is the length of an outbox key.
const OutboxKeyLen = 1 + 8

// AppendOutboxKey appends the key of the outbox entry whose first reading
// is seq: 'O' seq(8B BE).
func AppendOutboxKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, byte(KindOutbox)), seq)
}

// ParseOutboxKey parses a key written by AppendOutboxKey.
func ParseOutboxKey(k []byte) (seq uint64, err error) {
	return parseSeqKey(k, KindOutbox)
}

func parseSeqKey(k []byte, kind KeyKind) (uint64, error) {
	if len(k) != 1+8 || KeyKind(k[0]) != kind {
		return 0, fmt.Errorf("%w: not a %q key (%d bytes)", ErrBadKey, byte(kind), len(k))
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}
