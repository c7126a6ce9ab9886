package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCrash_SIGKILLExternalBroker kills cairn, subscribed to Mosquitto in
// a persistent session, at random moments while sensors publish to
// Mosquitto without pause: every message Mosquitto acknowledged to a
// sensor must end up stored, once. cairn's own PUBACK to Mosquitto, the
// one that makes Mosquitto forget the message, goes on the connection the
// message came by once its readings are committed; a PUBACK that went
// earlier would let a kill lose what Mosquitto then holds as delivered.
func TestCrash_SIGKILLExternalBroker(t *testing.T) {
	const cycles = 20
	broker := startMosquitto(t)
	bin := cairnBinary.get(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, fmt.Sprintf(`
data_dir: %%DATA%%
mqtt:
  url: tcp://%s
  client_id: cairn-crash-external
  topics:
    - pattern: "sensors/{device}/telemetry"
http:
  listen: "127.0.0.1:0"
store:
  bucket_samples: 16
`, broker.addr()))

	// The sensors publish to Mosquitto all through the kills, from the
	// moment cairn's session holds its subscription (Mosquitto keeps
	// nothing for a topic nobody subscribed to): Mosquitto's PUBACKs are
	// the acknowledgements checked in the end.
	fleet := &sensorFleet{devices: 32, window: 64, acks: newAckLog(0)}
	stop := make(chan struct{})
	stopOnce := sync.OnceFunc(func() { close(stop) })
	t.Cleanup(stopOnce)
	published := make(chan error, 1)

	var before uint64
	for cycle := range cycles {
		p := startCairn(t, bin, cfg)
		api := newAPIClient(p.http)
		waitUntil(t, 30*time.Second, "cairn to subscribe at Mosquitto", func() (bool, string) {
			st := api.status(t)
			return st.MQTT.Connected, fmt.Sprintf("%+v", st.MQTT)
		})
		if cycle == 0 {
			go func() {
				// Like sensors, the fleet connects again when its
				// connection fails, until it is stopped.
				for {
					err := fleet.publish(broker.addr(), true, stop)
					select {
					case <-stop:
						published <- err
						return
					default:
						time.Sleep(100 * time.Millisecond)
					}
				}
			}()
		}
		// Killed under load: once this start has stored readings.
		waitUntil(t, 30*time.Second, "cairn to store readings", func() (bool, string) {
			st := api.status(t)
			return st.Store.Readings > p.readings, fmt.Sprintf("%d readings at start, %d now", p.readings, st.Store.Readings)
		})
		if p.readings < before {
			t.Fatalf("cycle %d: the store holds %d readings after the restart, %d before the kill\noutput:\n%s", cycle, p.readings, before, p.out)
		}
		time.Sleep(200*time.Millisecond + rand.N(600*time.Millisecond))
		st := api.status(t)
		if !st.MQTT.Connected {
			t.Fatalf("cycle %d: cairn is not connected to Mosquitto: %+v\noutput:\n%s", cycle, st.MQTT, p.out)
		}
		if st.Store.Readings <= p.readings {
			t.Fatalf("cycle %d: cairn stored nothing before the kill (%d readings at start, %d now)", cycle, p.readings, st.Store.Readings)
		}
		before = st.Store.Readings
		t.Logf("cycle %d: at start %d, before kill %d readings, %d messages, %d dups, fleet acks %d", cycle, p.readings, st.Store.Readings, st.Ingest.Messages, st.Ingest.Duplicates, fleet.acks.count())
		if err := p.signal(t, syscall.SIGKILL); err == nil {
			t.Fatalf("cycle %d: cairn exited cleanly on SIGKILL", cycle)
		}
	}
	stopOnce()
	<-published // stopped: every PUBACK or error is in
	// What was in flight when the sensors stopped goes again, once.
	if err := fleet.publish(broker.addr(), false, nil); err != nil {
		t.Fatalf("publisher: %v\nmosquitto:\n%s", err, broker.proc.out)
	}
	if len(fleet.acks.pending()) > 0 {
		t.Fatalf("%d messages have no PUBACK from Mosquitto", len(fleet.acks.pending()))
	}

	// The last start takes what Mosquitto kept for the session.
	p := startCairn(t, bin, cfg)
	want := uint64(fleet.ackedReadings())
	api := newAPIClient(p.http)
	waitUntil(t, time.Minute, "cairn to store every message Mosquitto acknowledged", func() (bool, string) {
		st := api.status(t)
		return st.Store.Readings >= want, fmt.Sprintf("%d of %d readings stored", st.Store.Readings, want)
	})
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("cairn after SIGTERM: got %v, want exit status 0\noutput:\n%s", err, p.out)
	}
	stored, missing, doubled := checkStored(t, dataDir, fleet.msgs, fleet.acks)
	if stored != int(want) {
		t.Errorf("stored %d readings, want the %d of the %d messages Mosquitto acknowledged", stored, want, fleet.acks.count())
	}
	t.Logf("%d kills; messages acknowledged by Mosquitto %d, readings stored %d, missing %d, doubled %d", cycles, fleet.acks.count(), stored, missing, doubled)
}
