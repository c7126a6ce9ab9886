//
// SPDX-FileCopyrightText: © 2017-2025 Istari Digital, Inc.
// SPDX-License-Identifier: Apache-2.0

// Changed for cairn from the v4.9.6 release: see third_party/badger/CAIRN.md.

// The messages of badgerpb4.proto, encoded and decoded with protowire
// alone: the generated code needed the whole protobuf runtime (its
// reflection, registry and descriptors), about 1.6 MB of a stripped
// binary, for seven small messages. The encoding is the one
// proto.Marshal writes for proto3: fields in number order, a field
// with its zero value left out. Decoding skips fields it does not know,
// and resets the message first, as proto.Unmarshal does.

package pb

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

type EncryptionAlgo int32

const (
	EncryptionAlgo_aes EncryptionAlgo = 0
)

type ManifestChange_Operation int32

const (
	ManifestChange_CREATE ManifestChange_Operation = 0
	ManifestChange_DELETE ManifestChange_Operation = 1
)

type Checksum_Algorithm int32

const (
	Checksum_CRC32C   Checksum_Algorithm = 0
	Checksum_XXHash64 Checksum_Algorithm = 1
)

type KV struct {
	Key       []byte
	Value     []byte
	UserMeta  []byte
	Version   uint64
	ExpiresAt uint64
	Meta      []byte
	// Stream id is used to identify which stream the KV came from.
	StreamId uint32
	// Stream done is used to indicate end of stream.
	StreamDone bool
}

type KVList struct {
	Kv []*KV
	// alloc_ref used internally for memory management.
	AllocRef uint64
}

type ManifestChangeSet struct {
	// A set of changes that are applied atomically.
	Changes []*ManifestChange
}

type ManifestChange struct {
	Id             uint64 // Table ID.
	Op             ManifestChange_Operation
	Level          uint32 // Only used for CREATE.
	KeyId          uint64
	EncryptionAlgo EncryptionAlgo
	Compression    uint32 // Only used for CREATE Op.
}

type Checksum struct {
	Algo Checksum_Algorithm // For storing type of Checksum algorithm used
	Sum  uint64
}

type DataKey struct {
	KeyId     uint64
	Data      []byte
	Iv        []byte
	CreatedAt int64
}

type Match struct {
	Prefix      []byte
	IgnoreBytes string // Comma separated with dash to represent ranges "1, 2-3, 4-7, 9"
}

// Message is what Marshal, Size and Unmarshal take: each message here.
type Message interface {
	appendTo(b []byte) []byte
	size() int
	unmarshal(b []byte) error
}

// Marshal returns m's encoding.
func Marshal(m Message) ([]byte, error) {
	return m.appendTo(make([]byte, 0, m.size())), nil
}

// MarshalAppend appends m's encoding to b.
func MarshalAppend(b []byte, m Message) ([]byte, error) {
	return m.appendTo(b), nil
}

// Size returns the length of m's encoding.
func Size(m Message) int { return m.size() }

// Unmarshal decodes b into m, which it resets first. Bytes are copied
// out of b.
func Unmarshal(b []byte, m Message) error { return m.unmarshal(b) }

var errTruncated = errors.New("pb: message truncated or malformed")

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func sizeBytes(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func sizeVarint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func boolVarint(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// fields calls f with each field of b, its number, wire type and value
// (the bytes of a BytesType field, the number of a VarintType one); a
// field of another type is skipped.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errTruncated
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errTruncated
			}
			b = b[n:]
			if err := f(num, typ, v, nil); err != nil {
				return err
			}
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errTruncated
			}
			b = b[n:]
			if err := f(num, typ, 0, v); err != nil {
				return err
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errTruncated
			}
			b = b[n:]
		}
	}
	return nil
}

// field checks that a known field has the wire type its number has.
func field(typ, want protowire.Type) error {
	if typ != want {
		return errTruncated
	}
	return nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

func (x *KV) appendTo(b []byte) []byte {
	b = appendBytes(b, 1, x.Key)
	b = appendBytes(b, 2, x.Value)
	b = appendBytes(b, 3, x.UserMeta)
	b = appendVarint(b, 4, x.Version)
	b = appendVarint(b, 5, x.ExpiresAt)
	b = appendBytes(b, 6, x.Meta)
	b = appendVarint(b, 10, uint64(x.StreamId))
	b = appendVarint(b, 11, boolVarint(x.StreamDone))
	return b
}

func (x *KV) size() int {
	return sizeBytes(1, len(x.Key)) + sizeBytes(2, len(x.Value)) + sizeBytes(3, len(x.UserMeta)) +
		sizeVarint(4, x.Version) + sizeVarint(5, x.ExpiresAt) + sizeBytes(6, len(x.Meta)) +
		sizeVarint(10, uint64(x.StreamId)) + sizeVarint(11, boolVarint(x.StreamDone))
}

func (x *KV) unmarshal(b []byte) error {
	*x = KV{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1, 2, 3, 6:
			if err := field(typ, protowire.BytesType); err != nil {
				return err
			}
			switch num {
			case 1:
				x.Key = clone(bs)
			case 2:
				x.Value = clone(bs)
			case 3:
				x.UserMeta = clone(bs)
			case 6:
				x.Meta = clone(bs)
			}
		case 4, 5, 10, 11:
			if err := field(typ, protowire.VarintType); err != nil {
				return err
			}
			switch num {
			case 4:
				x.Version = v
			case 5:
				x.ExpiresAt = v
			case 10:
				x.StreamId = uint32(v)
			case 11:
				x.StreamDone = v != 0
			}
		}
		return nil
	})
}

func (x *KVList) appendTo(b []byte) []byte {
	for _, kv := range x.Kv {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(kv.size()))
		b = kv.appendTo(b)
	}
	return appendVarint(b, 10, x.AllocRef)
}

func (x *KVList) size() int {
	n := 0
	for _, kv := range x.Kv {
		n += protowire.SizeTag(1) + protowire.SizeBytes(kv.size())
	}
	return n + sizeVarint(10, x.AllocRef)
}

func (x *KVList) unmarshal(b []byte) error {
	*x = KVList{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1:
			if err := field(typ, protowire.BytesType); err != nil {
				return err
			}
			kv := new(KV)
			if err := kv.unmarshal(bs); err != nil {
				return err
			}
			x.Kv = append(x.Kv, kv)
		case 10:
			if err := field(typ, protowire.VarintType); err != nil {
				return err
			}
			x.AllocRef = v
		}
		return nil
	})
}

func (x *ManifestChangeSet) appendTo(b []byte) []byte {
	for _, c := range x.Changes {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(c.size()))
		b = c.appendTo(b)
	}
	return b
}

func (x *ManifestChangeSet) size() int {
	n := 0
	for _, c := range x.Changes {
		n += protowire.SizeTag(1) + protowire.SizeBytes(c.size())
	}
	return n
}

func (x *ManifestChangeSet) unmarshal(b []byte) error {
	*x = ManifestChangeSet{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if num != 1 {
			return nil
		}
		if err := field(typ, protowire.BytesType); err != nil {
			return err
		}
		c := new(ManifestChange)
		if err := c.unmarshal(bs); err != nil {
			return err
		}
		x.Changes = append(x.Changes, c)
		return nil
	})
}

func (x *ManifestChange) appendTo(b []byte) []byte {
	b = appendVarint(b, 1, x.Id)
	b = appendVarint(b, 2, uint64(x.Op))
	b = appendVarint(b, 3, uint64(x.Level))
	b = appendVarint(b, 4, x.KeyId)
	b = appendVarint(b, 5, uint64(x.EncryptionAlgo))
	b = appendVarint(b, 6, uint64(x.Compression))
	return b
}

func (x *ManifestChange) size() int {
	return sizeVarint(1, x.Id) + sizeVarint(2, uint64(x.Op)) + sizeVarint(3, uint64(x.Level)) +
		sizeVarint(4, x.KeyId) + sizeVarint(5, uint64(x.EncryptionAlgo)) + sizeVarint(6, uint64(x.Compression))
}

func (x *ManifestChange) unmarshal(b []byte) error {
	*x = ManifestChange{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if num < 1 || num > 6 {
			return nil
		}
		if err := field(typ, protowire.VarintType); err != nil {
			return err
		}
		switch num {
		case 1:
			x.Id = v
		case 2:
			x.Op = ManifestChange_Operation(int32(v))
		case 3:
			x.Level = uint32(v)
		case 4:
			x.KeyId = v
		case 5:
			x.EncryptionAlgo = EncryptionAlgo(int32(v))
		case 6:
			x.Compression = uint32(v)
		}
		return nil
	})
}

func (x *Checksum) appendTo(b []byte) []byte {
	b = appendVarint(b, 1, uint64(x.Algo))
	return appendVarint(b, 2, x.Sum)
}

func (x *Checksum) size() int { return sizeVarint(1, uint64(x.Algo)) + sizeVarint(2, x.Sum) }

func (x *Checksum) unmarshal(b []byte) error {
	*x = Checksum{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if num != 1 && num != 2 {
			return nil
		}
		if err := field(typ, protowire.VarintType); err != nil {
			return err
		}
		if num == 1 {
			x.Algo = Checksum_Algorithm(int32(v))
		} else {
			x.Sum = v
		}
		return nil
	})
}

func (x *DataKey) appendTo(b []byte) []byte {
	b = appendVarint(b, 1, x.KeyId)
	b = appendBytes(b, 2, x.Data)
	b = appendBytes(b, 3, x.Iv)
	return appendVarint(b, 4, uint64(x.CreatedAt))
}

func (x *DataKey) size() int {
	return sizeVarint(1, x.KeyId) + sizeBytes(2, len(x.Data)) + sizeBytes(3, len(x.Iv)) + sizeVarint(4, uint64(x.CreatedAt))
}

func (x *DataKey) unmarshal(b []byte) error {
	*x = DataKey{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		switch num {
		case 1, 4:
			if err := field(typ, protowire.VarintType); err != nil {
				return err
			}
			if num == 1 {
				x.KeyId = v
			} else {
				x.CreatedAt = int64(v)
			}
		case 2, 3:
			if err := field(typ, protowire.BytesType); err != nil {
				return err
			}
			if num == 2 {
				x.Data = clone(bs)
			} else {
				x.Iv = clone(bs)
			}
		}
		return nil
	})
}

func (x *Match) appendTo(b []byte) []byte {
	b = appendBytes(b, 1, x.Prefix)
	if x.IgnoreBytes != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, x.IgnoreBytes)
	}
	return b
}

func (x *Match) size() int { return sizeBytes(1, len(x.Prefix)) + sizeBytes(2, len(x.IgnoreBytes)) }

func (x *Match) unmarshal(b []byte) error {
	*x = Match{}
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if num != 1 && num != 2 {
			return nil
		}
		if err := field(typ, protowire.BytesType); err != nil {
			return err
		}
		if num == 1 {
			x.Prefix = clone(bs)
		} else {
			x.IgnoreBytes = string(bs)
		}
		return nil
	})
}

// Getters, as the generated code has them: nil-safe.

func (x *KV) GetKey() []byte {
	if x != nil {
		return x.Key
	}
	return nil
}

func (x *KV) GetValue() []byte {
	if x != nil {
		return x.Value
	}
	return nil
}

func (x *KV) GetUserMeta() []byte {
	if x != nil {
		return x.UserMeta
	}
	return nil
}

func (x *KV) GetVersion() uint64 {
	if x != nil {
		return x.Version
	}
	return 0
}

func (x *KV) GetExpiresAt() uint64 {
	if x != nil {
		return x.ExpiresAt
	}
	return 0
}

func (x *KV) GetMeta() []byte {
	if x != nil {
		return x.Meta
	}
	return nil
}

func (x *KV) GetStreamId() uint32 {
	if x != nil {
		return x.StreamId
	}
	return 0
}

func (x *KV) GetStreamDone() bool {
	if x != nil {
		return x.StreamDone
	}
	return false
}

func (x *KVList) GetKv() []*KV {
	if x != nil {
		return x.Kv
	}
	return nil
}

func (x *KVList) GetAllocRef() uint64 {
	if x != nil {
		return x.AllocRef
	}
	return 0
}

func (x *ManifestChangeSet) GetChanges() []*ManifestChange {
	if x != nil {
		return x.Changes
	}
	return nil
}

func (x *ManifestChange) GetId() uint64 {
	if x != nil {
		return x.Id
	}
	return 0
}

func (x *ManifestChange) GetOp() ManifestChange_Operation {
	if x != nil {
		return x.Op
	}
	return ManifestChange_CREATE
}

func (x *ManifestChange) GetLevel() uint32 {
	if x != nil {
		return x.Level
	}
	return 0
}

func (x *ManifestChange) GetKeyId() uint64 {
	if x != nil {
		return x.KeyId
	}
	return 0
}

func (x *ManifestChange) GetEncryptionAlgo() EncryptionAlgo {
	if x != nil {
		return x.EncryptionAlgo
	}
	return EncryptionAlgo_aes
}

func (x *ManifestChange) GetCompression() uint32 {
	if x != nil {
		return x.Compression
	}
	return 0
}

func (x *Checksum) GetAlgo() Checksum_Algorithm {
	if x != nil {
		return x.Algo
	}
	return Checksum_CRC32C
}

func (x *Checksum) GetSum() uint64 {
	if x != nil {
		return x.Sum
	}
	return 0
}

func (x *DataKey) GetKeyId() uint64 {
	if x != nil {
		return x.KeyId
	}
	return 0
}

func (x *DataKey) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

func (x *DataKey) GetIv() []byte {
	if x != nil {
		return x.Iv
	}
	return nil
}

func (x *DataKey) GetCreatedAt() int64 {
	if x != nil {
		return x.CreatedAt
	}
	return 0
}

func (x *Match) GetPrefix() []byte {
	if x != nil {
		return x.Prefix
	}
	return nil
}

func (x *Match) GetIgnoreBytes() string {
	if x != nil {
		return x.IgnoreBytes
	}
	return ""
}
