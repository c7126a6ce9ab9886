package buffer

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/cairn-gateway/cairn/third_party/badger/pb"
)

// TestBadgerPB_SameBytesAsProtobuf: the messages of Badger's pb package,
// which cairn's copy encodes with protowire alone, encode to the bytes
// that the generated code and proto.Marshal wrote (recorded from Badger
// v4.9.6's pb with google.golang.org/protobuf v1.36), and decode from
// them to what was encoded: a store written by an older cairn (its
// MANIFEST, its tables' checksums) reads the same, and the other way.
func TestBadgerPB_SameBytesAsProtobuf(t *testing.T) {
	cases := []struct {
		name   string
		msg    pb.Message
		empty  func() pb.Message
		golden string
	}{
		{"KV", &pb.KV{Key: []byte("key"), Value: []byte("value"), UserMeta: []byte{1}, Version: 300, ExpiresAt: 1 << 40, Meta: []byte{2, 3}, StreamId: 77, StreamDone: true},
			func() pb.Message { return new(pb.KV) }, "0a036b6579120576616c75651a010120ac022880808080802032020203504d5801"},
		{"empty KV", &pb.KV{}, func() pb.Message { return new(pb.KV) }, ""},
		{"KVList", &pb.KVList{Kv: []*pb.KV{{Key: []byte("a"), Version: 1}, {Key: []byte("b"), Value: []byte("v")}}, AllocRef: 12345},
			func() pb.Message { return new(pb.KVList) }, "0a050a016120010a060a016212017650b960"},
		{"ManifestChangeSet", &pb.ManifestChangeSet{Changes: []*pb.ManifestChange{{Id: 7, Op: pb.ManifestChange_CREATE, Level: 1}, {Id: 1 << 33, Op: pb.ManifestChange_DELETE}, {Id: 9, Level: 6, KeyId: 5, Compression: 2}}},
			func() pb.Message { return new(pb.ManifestChangeSet) }, "0a04080718010a0808808080802010010a080809180620053002"},
		{"Checksum XXHash64", &pb.Checksum{Algo: pb.Checksum_XXHash64, Sum: 0xfedcba9876543210},
			func() pb.Message { return new(pb.Checksum) }, "08011090e4d0b287d3aeeefe01"},
		{"Checksum CRC32C", &pb.Checksum{Algo: pb.Checksum_CRC32C, Sum: 12}, func() pb.Message { return new(pb.Checksum) }, "100c"},
		{"DataKey", &pb.DataKey{KeyId: 3, Data: []byte("0123456789abcdef"), Iv: []byte("iv"), CreatedAt: -5},
			func() pb.Message { return new(pb.DataKey) }, "08031210303132333435363738396162636465661a02697620fbffffffffffffffff01"},
		{"Match", &pb.Match{Prefix: []byte("pre"), IgnoreBytes: "1, 2-3"}, func() pb.Message { return new(pb.Match) }, "0a037072651206312c20322d33"},
	}
	for _, c := range cases {
		want, _ := hex.DecodeString(c.golden)
		got, err := pb.Marshal(c.msg)
		if err != nil || !bytes.Equal(got, want) || pb.Size(c.msg) != len(want) {
			t.Errorf("%s: Marshal %x %v, Size %d; want %x", c.name, got, err, pb.Size(c.msg), want)
		}
		if got, _ := pb.MarshalAppend([]byte{0xff}, c.msg); !bytes.Equal(got, append([]byte{0xff}, want...)) {
			t.Errorf("%s: MarshalAppend %x", c.name, got)
		}
		back := c.empty()
		if err := pb.Unmarshal(want, back); err != nil {
			t.Fatalf("%s: Unmarshal: %v", c.name, err)
		}
		// Decoding resets: a second decode into the same message gives
		// the same, not twice the repeated fields.
		if err := pb.Unmarshal(want, back); err != nil {
			t.Fatalf("%s: Unmarshal again: %v", c.name, err)
		}
		if !reflect.DeepEqual(normal(back), normal(c.msg)) {
			t.Errorf("%s: decoded %+v, want %+v", c.name, back, c.msg)
		}
	}

	// A field that a newer writer adds (number 15, of each wire type) is
	// skipped; a truncated message is an error.
	var cs pb.Checksum
	withUnknown, _ := hex.DecodeString("0801" + "7801" + "7a0161" + "7d01020304" + "790102030405060708" + "100c")
	if err := pb.Unmarshal(withUnknown, &cs); err != nil || cs.Algo != pb.Checksum_XXHash64 || cs.Sum != 12 {
		t.Errorf("unknown fields: %+v %v", cs, err)
	}
	full, _ := hex.DecodeString("0a04080718010a0808808080802010010a080809180620053002")
	var set pb.ManifestChangeSet
	for n := 1; n < len(full); n++ {
		if err := pb.Unmarshal(full[:n], &set); err == nil && n != 6 && n != 16 {
			t.Errorf("%d of %d bytes decoded without an error: %+v", n, len(full), set)
		}
	}
}

// normal makes the empty byte slices of m nil, as Unmarshal may leave
// them either way.
func normal(m pb.Message) pb.Message {
	if kv, ok := m.(*pb.KV); ok {
		c := *kv
		for _, b := range []*[]byte{&c.Key, &c.Value, &c.UserMeta, &c.Meta} {
			if len(*b) == 0 {
				*b = nil
			}
		}
		return &c
	}
	return m
}
