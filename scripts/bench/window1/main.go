// Command window1 is a publisher that waits for each PUBACK before it sends
// the next message (a window of one, as Telegraf's MQTT output and many
// bridges publish), for scripts/bench.sh window1. It publishes QoS 1 JSON
// messages of two readings to sensors/{device}/telemetry for -duration and
// prints one JSON line: messages acknowledged, seconds, messages a second
// and the median and p99 time from PUBLISH to PUBACK.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

func main() {
	broker := flag.String("broker", "tcp://127.0.0.1:1883", "broker `url`")
	device := flag.String("device", "window1", "device id in the topic")
	duration := flag.Duration("duration", 10*time.Second, "how long to publish")
	flag.Parse()
	if err := run(*broker, *device, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "window1:", err)
		os.Exit(1)
	}
}

func run(broker, device string, duration time.Duration) error {
	opts := paho.NewClientOptions().AddBroker(broker).SetClientID("cairn-bench-window1").SetAutoReconnect(false)
	c := paho.NewClient(opts)
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		return fmt.Errorf("connect %s: %w", broker, tok.Error())
	}
	defer c.Disconnect(250)
	topic := "sensors/" + device + "/telemetry"
	var waits []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < duration; i++ {
		at := time.Now()
		tok := c.Publish(topic, 1, false, fmt.Sprintf(`{"ts":%d,"temperature":%d,"humidity":%d}`, at.UnixMilli(), 20+i%5, 40+i%7))
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			return fmt.Errorf("message %d: no PUBACK in 30 s (%v)", i, tok.Error())
		}
		waits = append(waits, time.Since(at))
	}
	el := time.Since(start).Seconds()
	slices.Sort(waits)
	ms := func(q float64) float64 {
		return math.Round(float64(waits[int(q*float64(len(waits)-1))].Microseconds())) / 1000
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"acked":        len(waits),
		"seconds":      math.Round(el*1000) / 1000,
		"msgs_per_sec": math.Round(float64(len(waits))/el*10) / 10,
		"ack_p50_ms":   ms(0.5),
		"ack_p99_ms":   ms(0.99),
	})
}
