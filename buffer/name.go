package buffer

import (
	"fmt"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// checkNames returns an error naming the first reading whose device id
// or metric name is not valid (encoding.CheckDevice,
// encoding.CheckMetric): such a name could break the keys of its series.
func checkNames(rs []Reading) error {
	for i := range rs {
		if prob := encoding.CheckDevice(rs[i].Device); prob != "" {
			return fmt.Errorf("reading %d: device %q: %s", i, rs[i].Device, prob)
		}
		if prob := encoding.CheckMetric(rs[i].Metric); prob != "" {
			return fmt.Errorf("reading %d: metric %q: %s", i, rs[i].Metric, prob)
		}
		if t := rs[i].Text; t != "" && !encoding.ValidText(t) {
			return fmt.Errorf("reading %d: text %q: not 1 to %d bytes of UTF-8 without 0x00", i, t, encoding.MaxText)
		}
		if t := rs[i].Word; t != "" && !encoding.ValidText(t) {
			return fmt.Errorf("reading %d: word %q: not 1 to %d bytes of UTF-8 without 0x00", i, t, encoding.MaxText)
		}
	}
	return nil
}
