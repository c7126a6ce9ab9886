package buffer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// When a device was last heard. A reading's own time says when it was
// read, by the device's clock, which may be years off; when cairn last
// heard from the device is another matter, and the one that says whether
// it is alive. A group commit hears every device of which it stores a
// reading, at the time the commit began, by the gateway's clock. A
// duplicate is not heard: it is what a broker delivers again (a QoS 1
// redelivery, a retained message at each subscription), not word from
// the device. The
// store keeps that time in memory for each device (Device.Heard), and on
// disk under
//
//	's' device 0x00 → the time (encoding.AppendTS)
//
// written in the transaction of the commit part that heard the device,
// but only when it moves by heardResolution or more: a device that
// publishes every second costs one small key a minute, not one a
// commit. After a restart a device is heard as the store last recorded,
// at most heardResolution early. Open deletes the keys of devices that are
// not in the index; a device of a store written before the keys were
// kept is heard, until it is next heard, at the time of its newest
// reading or the start, whichever is earlier.

// heardResolution is how far a device's heard time moves before it is
// written to the store again.
const heardResolution = time.Minute

// hear notes that the part under way, in txn, heard device (a reading
// of it is stored), and writes its heard time there when
// the time recorded is heardResolution old or more and the entry fits
// part. One that does not fit is written by a later part. Run goroutine
// only.
func (w *Writer) hear(txn *badger.Txn, part *txnBudget, device string) error {
	if device == w.heardLast {
		return nil
	}
	w.heardLast = device
	if _, ok := w.heard[device]; ok {
		return nil
	}
	saved := int64(math.MinInt64)
	if d := w.store.devices[device]; d != nil { // only this goroutine writes the map
		saved = d.heardSaved
	}
	write := saved == math.MinInt64 || w.heardAt-saved >= int64(heardResolution)
	if write && part.takeSize(int64(1+len(device)+1+8)+2) {
		if err := txn.Set(encoding.AppendHeardKey(nil, device), encoding.AppendTS(nil, w.heardAt)); err != nil {
			return fmt.Errorf("heard %q: %w", device, err)
		}
	} else {
		write = false
	}
	w.heard[device] = write
	return nil
}

// heardCommitted gives the devices the part just committed heard their
// time. The caller holds Store.mu.
func (w *Writer) heardCommitted() {
	for device, written := range w.heard {
		if d := w.store.devices[device]; d != nil {
			d.heard = max(d.heard, w.heardAt)
			if written {
				d.heardSaved = w.heardAt
			}
		}
	}
	w.forgetHeard()
}

// forgetHeard clears what the part under way heard.
func (w *Writer) forgetHeard() {
	clear(w.heard)
	w.heardLast = ""
}

// loadHeard gives the devices of the index the times stored for them, or,
// for those with none, the time of their newest reading or now,
// whichever is earlier, and deletes the keys of devices not in the index
// and keys that are not heard keys. The deletes are not synced and a
// failure to delete is logged, not returned, as loadUnits does.
func (s *Store) loadHeard() error {
	now := time.Now().UnixNano()
	for _, d := range s.devices {
		d.heard, d.heardSaved = math.MinInt64, math.MinInt64
	}
	var drop [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindHeard)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			device, err := encoding.ParseHeardKey(item.Key())
			var d *deviceSeries
			if err == nil {
				d = s.devices[device]
			}
			if d == nil {
				drop = append(drop, item.KeyCopy(nil))
				continue
			}
			err = item.Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("heard %q: %d bytes, want 8", device, len(v))
				}
				d.heard = encoding.DecodeTS(v)
				d.heardSaved = d.heard
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load heard times: %w", err)
	}
	for _, st := range s.series {
		if d := s.devices[st.device]; d.heardSaved == math.MinInt64 && st.last != math.MinInt64 {
			d.heard = max(d.heard, min(st.last, now))
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if err := s.deleteKeys(drop); err != nil && !errors.Is(err, badger.ErrBlockedWrites) {
		s.log.Warn("could not delete the heard times of devices no longer stored; trying again at the next start", "devices", len(drop), "err", err)
	}
	return nil
}
