// Package encoding is the format of what cairn's store writes: the keys
// of every keyspace, sealed buckets of samples and the bit streams inside
// them, runs of open points, outbox and journal entries, the outbox's
// meta value, and the rule that keeps names from breaking a key.
//
// It holds no state, starts no goroutine and does no I/O: every function
// appends to a caller's buffer or parses one, and the store (package
// buffer) decides what to write where. Encoders append to dst and return
// the extended slice; decoders return io.ErrUnexpectedEOF for truncated
// input where the format allows telling it apart, and an error wrapping
// ErrBadKey, ErrBadBucket or ErrBadOutbox for anything else that is
// wrong. No decoder panics on any input. docs/storage.md describes the
// bytes.
package encoding
