package main

import (
	"fmt"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
)

// seed publishes, before the load, the sensors' readings of the hour
// before it (one message a device every seedEvery, QoS 1), so that
// readings expire under raw_max_age (at least an hour) all through the
// run and retention by age prunes about every minute, as on a board that
// has run for days. It returns the messages acknowledged.
func seed(broker string, until time.Time) (int64, error) {
	const seedEvery = 30 * time.Second
	opts := paho.NewClientOptions().AddBroker(broker).SetClientID("cairn-soak-seed").SetAutoReconnect(false)
	c := paho.NewClient(opts)
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		return 0, fmt.Errorf("seed: connect %s: %w", broker, tok.Error())
	}
	defer c.Disconnect(250)
	var toks []paho.Token
	for at := until.Add(-time.Hour + seedEvery); at.Before(until); at = at.Add(seedEvery) {
		for d := range devices {
			toks = append(toks, c.Publish(fmt.Sprintf("sensors/sim-%04d/telemetry", d), 1, false,
				fmt.Sprintf(`{"ts":%d,"temperature":%.2f,"humidity":%.2f}`, at.UnixMilli(), 20+float64(d%50)/10, 40+float64(d%30)/2)))
		}
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
			return 0, fmt.Errorf("seed: message %d: no PUBACK within a minute (%v)", i, tok.Error())
		}
	}
	return int64(len(toks)), nil
}
