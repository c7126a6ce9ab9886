package buffer

import (
	"fmt"
	"math"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/third_party/badger"
)

// Text series. A reading whose Text is not "" is a text reading (a state
// such as "heat", an event such as "single"); a series has one kind, the
// kind of its first stored reading. A text series keeps a dictionary,
// text → id, ids 0, 1, 2… in the order the store first met the texts,
// never reused, under
//
//	't' device 0x00 metric 0x00 id(4B BE) → the text
//
// and its points and buckets hold float64(id) as their value: duplicates
// (the same time and text), sealing, retention, the disk cap and a power
// cut treat a text reading as the number it is stored as. A new text is
// written in the transaction of the group commit part whose log entry
// holds the first reading that brings it, as a unit is (unit.go): a crash
// keeps or loses both. The log itself carries the text (an outbox entry of
// version 2), so the upstreams and Open's replay read texts, not ids. A
// number series is a series with no dictionary.
//
// A series holds at most WriterOptions.MaxStates texts (MaxText bytes
// each): a reading with a new text beyond that is refused
// (Result.TooManyStates), as is a reading of the other kind than its
// series (Result.WrongKind); the rest of the batch is stored. A number
// reading read from a state word (Reading.Word: "off", "ON") is of either
// kind: in a text series it is stored as the text its word is.
//
// In memory the dictionaries are a map beside the index (Store.texts), so
// that a number series costs no byte more; the Writer's own flag
// (seriesWork.text) sits in padding its state had.

// DefaultMaxStates is WriterOptions.MaxStates' default.
const DefaultMaxStates = 64

// MaxMaxStates bounds WriterOptions.MaxStates.
const MaxMaxStates = 65536

// textDict is the dictionary of a text series. texts only grows; the
// Writer's goroutine appends to it under Store.mu, and readers take its
// texts under Store.mu's read lock.
type textDict struct {
	texts []string
	ids   map[string]uint32
}

func (d *textDict) id(text string) (uint32, bool) {
	id, ok := d.ids[text]
	return id, ok
}

func (d *textDict) add(text string) {
	if d.ids == nil {
		d.ids = make(map[string]uint32)
	}
	d.ids[text] = uint32(len(d.texts))
	d.texts = append(d.texts, text)
}

// KindRefusal describes a reading the Writer refused for being of the
// other kind than its series.
type KindRefusal struct {
	Device, Metric string
	// SeriesText is true when the series is a text series (and the reading
	// a number), false when it is a number series (and the reading a text).
	SeriesText bool
}

func (r *KindRefusal) Error() string {
	series, reading := "number", "text"
	if r.SeriesText {
		series, reading = "text", "number"
	}
	return fmt.Sprintf("device %q metric %q is a %s series; a %s reading refused", r.Device, r.Metric, series, reading)
}

// StatesRefusal describes a reading the Writer refused because its text
// would have been one more than its series may hold.
type StatesRefusal struct {
	Device, Metric string
	Text           string
	Max            int // WriterOptions.MaxStates
}

func (r *StatesRefusal) Error() string {
	return fmt.Sprintf("device %q metric %q has %d texts (store.max_states_per_series); text %q refused", r.Device, r.Metric, r.Max, r.Text)
}

// IsText reports whether device's metric is a text series (false for a
// number series and for a series the store does not have).
func (s *Store) IsText(device, metric string) bool {
	return s.textsOf(device, metric) != nil
}

// Texts returns the texts of a text series in the order of their ids
// (nil for a number series or none). The slice must not be changed.
func (s *Store) Texts(device, metric string) []string {
	return s.textsOf(device, metric)
}

// textsOf returns the dictionary of a series as it is now: its texts by id.
func (s *Store) textsOf(device, metric string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.texts) == 0 {
		return nil
	}
	st := s.series[seriesID(device, metric)]
	if st == nil {
		return nil
	}
	if d := s.texts[st]; d != nil {
		return d.texts[:len(d.texts):len(d.texts)]
	}
	return nil
}

// withText turns r, read from a text series whose dictionary is texts,
// into the text reading it stands for: Text from its id, Value 0. A value
// that is not an id of texts is left as it is.
func withText(r *Reading, texts []string) {
	if texts == nil {
		return
	}
	id := r.Value
	if id >= 0 && id < float64(len(texts)) && id == math.Trunc(id) {
		r.Text, r.Value = texts[int(id)], 0
	}
}

// textKind says what the Writer does with a reading of a series of a
// kind.
type textKind int

const (
	kindOK      textKind = iota
	kindWrong            // the reading is of the other kind than its series
	kindTooMany          // a new text over WriterOptions.MaxStates
	kindNewText          // a new text, id given, to record with the reading
)

// isTextSeries reports whether st is a text series, committed or in the
// part under way. Writer's goroutine only.
func (w *Writer) isTextSeries(st *seriesState) bool {
	if st.text {
		return true
	}
	if len(w.newTexts) == 0 {
		return false
	}
	_, ok := w.newTexts[st]
	return ok
}

// hasReadings reports whether st holds a reading, committed or in the
// part under way: a series without any takes the kind of the next.
func hasReadings(st *seriesState) bool {
	return st.last != math.MinInt64 || st.next != math.MinInt64 || len(st.pend) > 0
}

// textID returns the id of the text of r, a text reading of st, and what
// to do with it.
func (w *Writer) textID(st *seriesState, text string) (uint32, textKind) {
	if !w.isTextSeries(st) {
		if hasReadings(st) {
			return 0, kindWrong
		}
		return 0, kindNewText
	}
	n := 0
	if d := w.store.texts[st]; d != nil { // only this goroutine writes it
		if id, ok := d.id(text); ok {
			return id, kindOK
		}
		n = len(d.texts)
	}
	for i, t := range w.newTexts[st] {
		if t == text {
			return uint32(n + i), kindOK
		}
	}
	n += len(w.newTexts[st])
	if n >= w.opts.MaxStates {
		return 0, kindTooMany
	}
	return uint32(n), kindNewText
}

// textEntrySize is what the key and value of a text of st take in a
// transaction (as txnBudget.take counts it).
func textEntrySize(st *seriesState, text string) int64 {
	return int64(1+len(st.device)+1+len(st.metric)+1+encoding.TextKeyFixed+len(text)) + 2
}

// setText writes the new text of st, of id, in txn, the part under way,
// which publishes it to the dictionary once committed (journaled).
func (w *Writer) setText(txn *badger.Txn, st *seriesState, id uint32, text string) error {
	if err := txn.Set(encoding.AppendTextKey(nil, st.device, st.metric, id), []byte(text)); err != nil {
		return fmt.Errorf("text of %q %q: %w", st.device, st.metric, err)
	}
	w.newTexts[st] = append(w.newTexts[st], text)
	return nil
}

// textsCommitted publishes the texts of the part just committed. The
// caller holds Store.mu for writing.
func (w *Writer) textsCommitted() {
	if len(w.newTexts) == 0 {
		return
	}
	s := w.store
	if s.texts == nil {
		s.texts = make(map[*seriesState]*textDict)
	}
	for st, texts := range w.newTexts {
		d := s.texts[st]
		if d == nil {
			d = &textDict{}
			s.texts[st] = d
		}
		for _, t := range texts {
			d.add(t)
		}
		st.text = true
	}
	clear(w.newTexts)
}

// refuseKind counts r, refused for its kind (what), in res, keeping the
// first of the batch as its example.
func (w *Writer) refuseKind(res *Result, st *seriesState, r *Reading, what textKind) {
	if what == kindWrong {
		res.WrongKind++
		if res.KindRefusal == nil {
			res.KindRefusal = &KindRefusal{Device: r.Device, Metric: r.Metric, SeriesText: !r.IsText()}
		}
		return
	}
	res.TooManyStates++
	if res.StatesRefusal == nil {
		res.StatesRefusal = &StatesRefusal{Device: r.Device, Metric: r.Metric, Text: r.Text, Max: w.opts.MaxStates}
	}
}

// loadTexts reads the dictionaries of the store: of the series of the
// index, and, apart, of those that are not in it yet (they may come with
// the log's replay, adoptTexts). A dictionary whose ids are not 0, 1, 2…
// keeps the texts up to the first gap.
func (s *Store) loadTexts() error {
	dicts := make(map[string]*textDict)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(encoding.KindText)}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			device, metric, id, err := encoding.ParseTextKey(item.Key())
			if err != nil {
				s.log.Warn("a stored text key is not valid; ignored", "key", fmt.Sprintf("%x", item.Key()), "err", err)
				continue
			}
			var text string
			if err := item.Value(func(v []byte) error { text = string(v); return nil }); err != nil {
				return fmt.Errorf("text %q: %w", item.Key(), err)
			}
			sid := seriesID(device, metric)
			d := dicts[sid]
			if d == nil {
				d = &textDict{}
				dicts[sid] = d
			}
			if int(id) != len(d.texts) || !encoding.ValidText(text) {
				s.log.Warn("a stored text is not the next of its series' dictionary; ignored", "device", device, "metric", metric, "id", id)
				continue
			}
			d.add(text)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load texts: %w", err)
	}
	for sid, d := range dicts {
		if len(d.texts) == 0 {
			continue
		}
		if st := s.series[sid]; st != nil {
			if s.texts == nil {
				s.texts = make(map[*seriesState]*textDict)
			}
			s.texts[st] = d
			st.text = true
			continue
		}
		if s.textsOrphan == nil {
			s.textsOrphan = make(map[string]*textDict)
		}
		s.textsOrphan[sid] = d
	}
	return nil
}

// adoptTexts gives st, a series the log's replay makes, the dictionary
// loadTexts found for it. Open only.
func (s *Store) adoptTexts(st *seriesState) {
	if st.text || s.textsOrphan == nil {
		return
	}
	sid := seriesID(st.device, st.metric)
	d := s.textsOrphan[sid]
	if d == nil {
		return
	}
	delete(s.textsOrphan, sid)
	if s.texts == nil {
		s.texts = make(map[*seriesState]*textDict)
	}
	s.texts[st] = d
	st.text = true
}

// dropTexts deletes the dictionaries of series that are not in the index
// after the log's replay: their readings were all pruned. Not synced, and
// a failure is logged (as loadUnits does).
func (s *Store) dropTexts() error {
	if len(s.textsOrphan) == 0 {
		s.textsOrphan = nil
		return nil
	}
	var drop [][]byte
	for sid, d := range s.textsOrphan {
		device, metric := splitSeriesID(sid)
		for id := range d.texts {
			drop = append(drop, encoding.AppendTextKey(nil, device, metric, uint32(id)))
		}
	}
	s.textsOrphan = nil
	if err := s.deleteKeys(drop); err != nil {
		s.log.Warn("could not delete the texts of series no longer stored; trying again at the next start", "texts", len(drop), "err", err)
		return nil
	}
	s.log.Info("deleted the texts of series no longer stored", "texts", len(drop))
	return nil
}

// replayText returns the sample that the text reading r of st (from the
// log) is stored as, and false if its text is not in st's dictionary.
// Open only.
func (s *Store) replayText(st *seriesState, r *Reading) (Sample, bool) {
	s.adoptTexts(st)
	d := s.texts[st]
	if d == nil {
		return Sample{}, false
	}
	id, ok := d.id(r.Text)
	return Sample{TS: r.TS, Value: float64(id)}, ok
}

// splitSeriesID returns the device and metric of a series id (seriesID).
func splitSeriesID(id string) (device, metric string) {
	for i := 0; i < len(id); i++ {
		if id[i] == encoding.Sep {
			return id[:i], id[i+1:]
		}
	}
	return id, ""
}
