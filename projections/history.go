package projections

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	gojson "github.com/goccy/go-json"

	"github.com/seed-0809debe/posture"
)

// History keys: h/<identityId>/<seq> (20 digits), the entries an event
// brought to the identity, in the order they were recorded, as one JSON
// array. History outlives the identity: it is the audit trail.
func historyPrefix(identityID string) []byte { return []byte("h/" + identityID + "/") }

func historyKey(identityID string, e posture.Event) []byte {
	return appendPosition(historyPrefix(identityID), e)
}

// historyRecord is what a history entry holds beyond the event that
// caused it (its sequence, time and type); appendHistory writes both in
// posture.HistoryEntry's JSON form.
type historyRecord struct {
	Kind         string
	APISessionID string
	Summary      string
	Detail       any
}

// identityHistory is what the event being applied adds to one identity's
// history.
type identityHistory struct {
	identityID string
	entries    []historyRecord
}

// history records an audit entry for an identity, caused by the event
// being applied. Entries are written when the event is done (flushHistory).
func (tx *Tx) history(identityID, apiSessionID, kind, summary string, detail any) {
	if tx.lean {
		return
	}
	r := historyRecord{Kind: kind, APISessionID: apiSessionID, Summary: summary, Detail: detail}
	if i, ok := tx.pendingIndex(identityID); ok {
		tx.pending[i].entries = append(tx.pending[i].entries, r)
		return
	}
	if tx.pendingAt != nil {
		tx.pendingAt[identityID] = len(tx.pending)
	}
	// Reuse the entries of an earlier event's identity (flushHistory
	// keeps them).
	n := len(tx.pending)
	if n < cap(tx.pending) {
		tx.pending = tx.pending[:n+1]
		tx.pending[n].identityID = identityID
		tx.pending[n].entries = append(tx.pending[n].entries[:0], r)
		return
	}
	tx.pending = append(tx.pending, identityHistory{identityID, []historyRecord{r}})
}

// pendingIndexAfter is how many identities an event's history entries
// concern before they are found through a map rather than a scan: a model
// change that re-evaluates a whole fleet would otherwise compare each
// identity with all those before it.
const pendingIndexAfter = 16

// pendingIndex finds the pending entries of an identity.
func (tx *Tx) pendingIndex(identityID string) (int, bool) {
	if tx.pendingAt != nil {
		i, ok := tx.pendingAt[identityID]
		return i, ok
	}
	for i := range tx.pending {
		if tx.pending[i].identityID == identityID {
			return i, true
		}
	}
	if len(tx.pending) >= pendingIndexAfter {
		tx.pendingAt = make(map[string]int, 2*len(tx.pending))
		for i := range tx.pending {
			tx.pendingAt[tx.pending[i].identityID] = i
		}
	}
	return 0, false
}

// flushHistory writes the entries of the event just applied.
func (tx *Tx) flushHistory() error {
	for _, h := range tx.pending {
		out := append(tx.out[:0], '[')
		for i, r := range h.entries {
			if i > 0 {
				out = append(out, ',')
			}
			var err error
			if out, err = tx.appendHistory(out, r); err != nil {
				return fmt.Errorf("encode the history of %s: %w", h.identityID, err)
			}
		}
		out = append(out, ']')
		if err := tx.b.Set(historyKey(h.identityID, tx.event), out, nil); err != nil {
			return err
		}
		tx.out = out // the batch copied it
	}
	tx.pending = tx.pending[:0]
	tx.pendingAt = nil // rare and possibly large: not kept for the next event
	return nil
}

// appendHistory appends r, caused by the event being applied, as a JSON
// object. History is the most written
// value of all (an entry or more per event), so its fixed fields are
// written directly and only the detail goes through encoding/json.
func (tx *Tx) appendHistory(out []byte, r historyRecord) ([]byte, error) {
	out = append(out, `{"seq":`...)
	out = strconv.AppendUint(out, tx.event.Seq, 10)
	if tx.event.Part > 0 {
		out = append(out, `,"part":`...)
		out = strconv.AppendInt(out, int64(tx.event.Part), 10)
	}
	out = append(out, `,"at":"`...)
	out = tx.event.At.AppendFormat(out, time.RFC3339Nano)
	out = append(out, `","kind":`...)
	out = appendString(out, r.Kind)
	out = append(out, `,"event":`...)
	out = appendString(out, tx.event.Type)
	if r.APISessionID != "" {
		out = append(out, `,"apiSessionId":`...)
		out = appendString(out, r.APISessionID)
	}
	out = append(out, `,"summary":`...)
	out = appendString(out, r.Summary)
	if r.Detail != nil {
		tx.enc.Reset()
		if err := tx.encoder.Encode(r.Detail); err != nil {
			return nil, err
		}
		out = append(out, `,"detail":`...)
		out = append(out, bytes.TrimSuffix(tx.enc.Bytes(), []byte("\n"))...)
	}
	return append(out, '}'), nil
}

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping (invalid UTF-8 becomes U+FFFD).
func appendString(out []byte, s string) []byte {
	q, err := gojson.MarshalWithOption(s, gojson.DisableHTMLEscape())
	if err != nil { // a string always encodes
		panic(fmt.Sprintf("projections: encode a string: %v", err))
	}
	return append(out, q...)
}

// responseSummary is a one-line description of a posture response.
func responseSummary(r posture.PostureResponse) string {
	switch r.TypeID {
	case string(posture.CheckOS):
		s := "OS " + r.Type + " " + r.Version
		if r.Build != "" {
			s += " build " + r.Build
		}
		return s
	case string(posture.CheckMAC):
		return "MAC " + strings.Join(r.MACAddresses, ", ")
	case string(posture.CheckDomain):
		return "domain " + r.Domain
	case string(posture.CheckProcess):
		state := "not running"
		if r.IsRunning {
			state = "running"
		}
		// The check it answered: a PROCESS check reads its own answers,
		// and one request may answer two checks at one path.
		return "process " + r.Path + " " + state + " for check " + r.ID
	}
	return r.TypeID
}

// History returns an identity's audit timeline between two times (zero:
// unbounded), in log order.
func (s *Store) History(identityID string, since, until time.Time) ([]posture.HistoryEntry, error) {
	out := []posture.HistoryEntry{}
	err := scanJSON(s.db, historyPrefix(identityID), func(entries []posture.HistoryEntry) bool {
		for _, e := range entries {
			if inWindow(e.At, since, until) {
				out = append(out, e)
			}
		}
		return true
	})
	return out, err
}

// inWindow reports whether at is in the window [since, until] (zero:
// unbounded).
func inWindow(at, since, until time.Time) bool {
	return (since.IsZero() || !at.Before(since)) && (until.IsZero() || !at.After(until))
}

// HistoryPage is History's entries offset..offset+limit of the window, and
// how many it holds. The window's entries are counted by their times alone
// (a record's entries decoded no further), and only the page's records are
// read whole: an identity's own requests make its history, and a page
// costs the count of the window, not the reading of all of it.
func (s *Store) HistoryPage(identityID string, since, until time.Time, offset, limit int) ([]posture.HistoryEntry, int, error) {
	prefix := historyPrefix(identityID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	upper, err := historyEnd(it, prefix, until)
	if err != nil {
		return nil, 0, err
	}
	page := []posture.HistoryEntry{}
	total := 0
	for ok := it.First(); ok && bytes.Compare(it.Key(), upper) < 0; ok = it.Next() {
		var times []struct {
			At time.Time `json:"at"`
		}
		if err := unmarshal(it.Value(), &times); err != nil {
			return nil, 0, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		var entries []posture.HistoryEntry // read whole when the page needs it
		for i, e := range times {
			if !inWindow(e.At, since, until) {
				continue
			}
			if total >= offset && len(page) < limit {
				if entries == nil {
					if err := unmarshal(it.Value(), &entries); err != nil {
						return nil, 0, fmt.Errorf("decode %s: %w", it.Key(), err)
					}
				}
				page = append(page, entries[i])
			}
			total++
		}
	}
	return page, total, it.Error()
}

// AccessBefore is, for each policy whose state for the identity changed
// before at, the newest such change (an access entry), oldest first: the
// states a window starting at at begins with. It reads back at most limit
// entries from at, so that its cost is bounded however long the history.
func (s *Store) AccessBefore(identityID string, at time.Time, limit int) ([]posture.HistoryEntry, error) {
	var out []posture.HistoryEntry // newest first
	seen := map[string]bool{}
	read := 0
	err := s.historyBack(identityID, at, func(e posture.HistoryEntry) bool {
		if read++; read > limit {
			return false
		}
		var t transition
		if e.Kind == posture.HistoryAccess && e.At.Before(at) && unmarshal(e.Detail, &t) == nil && !seen[t.PolicyID] {
			seen[t.PolicyID] = true
			out = append(out, e)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// historyBack calls fn with an identity's history entries newest first,
// from the end of a window ending at until (historyEnd) back, until fn
// returns false.
func (s *Store) historyBack(identityID string, until time.Time, fn func(posture.HistoryEntry) bool) error {
	prefix := historyPrefix(identityID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	end, err := historyEnd(it, prefix, until)
	if err != nil {
		return err
	}
	for ok := it.SeekLT(end); ok; ok = it.Prev() {
		var entries []posture.HistoryEntry
		if err := unmarshal(it.Value(), &entries); err != nil {
			return fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if !fn(entries[i]) {
				return nil
			}
		}
	}
	return it.Error()
}

// historySkew is how far out of time order the entries of two nodes may
// be (their clocks): the reads of a window look this far past its edges.
const historySkew = time.Minute

// HistoryTail is History's newest limit entries of the window, oldest
// first, and whether the window holds more (older ones). It finds the
// window's end by its records' times (historyEnd), then reads back from
// there, stopping once it has limit entries or has passed since by
// historySkew, so that its cost follows limit, not how many entries the
// identity has.
func (s *Store) HistoryTail(identityID string, since, until time.Time, limit int) ([]posture.HistoryEntry, bool, error) {
	var out []posture.HistoryEntry // newest first
	more := false
	err := s.historyBack(identityID, until, func(e posture.HistoryEntry) bool {
		switch {
		case !since.IsZero() && e.At.Before(since.Add(-historySkew)):
			return false
		case !inWindow(e.At, since, until):
			return true
		case len(out) == limit:
			more = true
			return false
		}
		out = append(out, e)
		return true
	})
	if err != nil {
		return nil, false, err
	}
	slices.Reverse(out)
	return out, more, nil
}

// historyEnd is the key after an identity's history records of a window
// ending at until (zero: all of them): a binary search over their
// sequences, up to the last record's, by the time of each record (the time
// of its event). Records are in the log's order, and their times follow it
// up to the nodes' clocks: the search looks historySkew past until, and the
// caller filters the entries.
func historyEnd(it *pebble.Iterator, prefix []byte, until time.Time) ([]byte, error) {
	if until.IsZero() || !it.Last() {
		return prefixEnd(prefix), it.Error()
	}
	after := until.Add(historySkew)
	key := func(seq uint64) []byte { return appendPosition(prefix, posture.Event{Seq: seq}) }
	seqOf := func() (uint64, error) {
		rest := it.Key()[len(prefix):]
		seq, err := strconv.ParseUint(string(rest[:min(len(rest), 20)]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("history key %s: %w", it.Key(), err)
		}
		return seq, nil
	}
	last, err := seqOf()
	if err != nil {
		return nil, err
	}
	lo, hi := uint64(0), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if !it.SeekGE(key(mid)) {
			hi = mid
			continue
		}
		seq, err := seqOf()
		if err != nil {
			return nil, err
		}
		var first []struct {
			At time.Time `json:"at"`
		}
		if err := unmarshal(it.Value(), &first); err != nil {
			return nil, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		if len(first) > 0 && first[0].At.After(after) {
			hi = mid
		} else {
			lo = seq + 1
		}
	}
	return key(lo), it.Error()
}
