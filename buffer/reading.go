package buffer

import "github.com/cairn-gateway/cairn/buffer/encoding"

// Reading is one sample of one series: a device's metric at a point in
// time (encoding.Reading, where the keys that hold it are encoded).
//
// Two readings are the same reading when Device, Metric, TS and Value (of
// a text reading, Text) are equal; the store keeps such a reading once,
// however often it is written. Two readings of one series with the same
// timestamp and different values (texts) are both kept.
type Reading = encoding.Reading

// Sample is one timestamped value of a series (encoding.Sample).
type Sample = encoding.Sample

// OutboxReading is a reading of the outbox and its sequence number
// (encoding.OutboxReading).
type OutboxReading = encoding.OutboxReading
