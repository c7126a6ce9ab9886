package uplink_test

import (
	"testing"

	"github.com/cairn-gateway/cairn/uplink"
)

// BenchmarkMessageEncoder_Split splits a batch of readings of two devices
// at AWS IoT Core's limit, 128 KB, and reports the bytes of the message
// bodies per reading.
func BenchmarkMessageEncoder_Split(b *testing.B) {
	rs := payloadReadings()
	for len(rs) < 5000 {
		rs = append(rs, rs[:min(len(rs), 5000-len(rs))]...)
	}
	for _, f := range []uplink.MessageFormat{uplink.MessageSenML, uplink.MessageInflux} {
		b.Run(f.String(), func(b *testing.B) {
			e := uplink.NewMessageEncoder(f, "pi-kitchen", "")
			var msgs []uplink.Message
			bytes := 0
			for b.Loop() {
				msgs, _ = e.Split(msgs[:0], rs, 128*1024)
			}
			for _, m := range msgs {
				bytes += len(m.Body)
			}
			b.ReportMetric(float64(bytes)/float64(len(rs)), "B/reading")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rs)), "ns/reading")
		})
	}
}
