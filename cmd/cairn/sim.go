package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// simSummary is what `cairn sim` prints when it is done, as one JSON line.
type simSummary struct {
	Sent     int64   `json:"sent"`
	Acked    int64   `json:"acked"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"msgs_per_sec"`
	Readings int64   `json:"readings"`
	// AckP50MS and AckP99MS are the median and 99th percentile of the
	// time from PUBLISH to PUBACK, in milliseconds (QoS 1 only).
	AckP50MS float64 `json:"ack_p50_ms,omitempty"`
	AckP99MS float64 `json:"ack_p99_ms,omitempty"`
}

// runSim publishes simulated sensor readings: each of N devices sends JSON
// messages with a millisecond "ts" and two numeric fields, round robin, at a
// total rate (0: as fast as the broker acknowledges).
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	broker := fs.String("broker", "tcp://127.0.0.1:1883", "broker `url`")
	devices := fs.Int("devices", 10, "number of simulated devices")
	rate := fs.Float64("rate", 10, "messages per second in total; 0 for as fast as possible")
	count := fs.Int64("count", 0, "stop after this many messages (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	qos := fs.Int("qos", 1, "MQTT QoS (0 or 1)")
	inflight := fs.Int("inflight", 100, "QoS 1 messages in flight at most")
	topic := fs.String("topic", "sensors/{device}/telemetry", "topic `pattern`; {device} is replaced")
	clientID := fs.String("client-id", "cairn-sim", "MQTT client id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *devices < 1 || *rate < 0 || *qos < 0 || *qos > 1 || *inflight < 1 {
		return fmt.Errorf("sim: need -devices ≥ 1, -rate ≥ 0, -qos 0 or 1, -inflight ≥ 1")
	}
	if *count == 0 && *duration == 0 && *rate == 0 {
		return fmt.Errorf("sim: with -rate 0 set -count or -duration")
	}
	opts := paho.NewClientOptions().AddBroker(*broker).SetClientID(*clientID).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(10 * time.Second).
		SetWriteTimeout(10 * time.Second)
	c := paho.NewClient(opts)
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		return fmt.Errorf("sim: connect %s: %w", *broker, tok.Error())
	}
	defer c.Disconnect(250)

	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	type sensor struct {
		topic     string
		temp, hum float64
		lastMS    int64
	}
	sensors := make([]sensor, *devices)
	for i := range sensors {
		dev := fmt.Sprintf("sim-%04d", i)
		sensors[i] = sensor{topic: strings.ReplaceAll(*topic, "{device}", dev), temp: 20 + rand.Float64()*5, hum: 40 + rand.Float64()*20}
	}
	// PUBACKs come in the order of the PUBLISHes, so waiting for the
	// tokens in order times each acknowledgement.
	type sentMsg struct {
		tok paho.Token
		at  time.Time
	}
	tokens := make(chan sentMsg, *inflight)
	acked := make(chan int64)
	var waits []time.Duration // publish to PUBACK of each acknowledged message; read after acked
	go func() {
		var n int64
		for m := range tokens {
			if m.tok.Wait(); m.tok.Error() == nil {
				n++
				waits = append(waits, time.Since(m.at))
			}
		}
		acked <- n
	}()

	start := time.Now()
	var sent int64
	var buf []byte
	interval := time.Duration(0)
	if *rate > 0 {
		interval = time.Duration(float64(time.Second) / *rate)
	}
	next := start
loop:
	for *count == 0 || sent < *count {
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					break loop
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		s := &sensors[sent%int64(len(sensors))]
		// Strictly increasing timestamps per device: at high rates several
		// messages share a millisecond, and equal readings are one reading.
		ms := max(time.Now().UnixMilli(), s.lastMS+1)
		s.lastMS = ms
		s.temp = walk(s.temp, 0.05)
		s.hum = walk(s.hum, 0.1)
		buf = append(buf[:0], `{"ts":`...)
		buf = strconv.AppendInt(buf, ms, 10)
		buf = append(buf, `,"temperature":`...)
		buf = strconv.AppendFloat(buf, s.temp, 'f', 2, 64)
		buf = append(buf, `,"humidity":`...)
		buf = strconv.AppendFloat(buf, s.hum, 'f', 2, 64)
		buf = append(buf, '}')
		at := time.Now()
		tok := c.Publish(s.topic, byte(*qos), false, append([]byte(nil), buf...))
		sent++
		tokens <- sentMsg{tok, at}
	}
	close(tokens)
	n := <-acked
	el := time.Since(start).Seconds()
	sum := simSummary{Sent: sent, Acked: n, Seconds: math.Round(el*1000) / 1000, Readings: 2 * n}
	if el > 0 {
		sum.PerSec = math.Round(float64(n) / el)
	}
	if *qos == 1 && len(waits) > 0 {
		slices.Sort(waits)
		ms := func(q float64) float64 {
			return math.Round(float64(waits[int(q*float64(len(waits)-1))].Microseconds())) / 1000
		}
		sum.AckP50MS, sum.AckP99MS = ms(0.5), ms(0.99)
	}
	return json.NewEncoder(stdout).Encode(sum)
}

// walk moves v by a random step of at most ±step, rounded to 2 decimals.
func walk(v, step float64) float64 {
	return math.Round((v+(rand.Float64()*2-1)*step)*100) / 100
}
