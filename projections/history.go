package projections

import (
	"fmt"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

// History keys: h/<identityId>/<seq>/<n>, one entry per fact or change an
// event brought to the identity, in log order. History outlives the
// identity: it is the audit trail.
func historyPrefix(identityID string) []byte { return []byte("h/" + identityID + "/") }

// history records an audit entry for an identity, caused by the event
// being applied.
func (tx *Tx) history(identityID, apiSessionID, kind, summary string, detail any) error {
	if tx.historyN == nil {
		tx.historyN = map[string]int{}
	}
	n := tx.historyN[identityID]
	tx.historyN[identityID] = n + 1
	e := posture.HistoryEntry{
		Seq: tx.event.Seq, At: tx.event.At, Kind: kind, Event: tx.event.Type,
		APISessionID: apiSessionID, Summary: summary,
	}
	if detail != nil {
		e.Detail = raw(detail)
	}
	return tx.put([]byte(fmt.Sprintf("h/%s/%020d/%03d", identityID, tx.event.Seq, n)), e)
}

// responseSummary is a one-line description of a posture response.
func responseSummary(r posture.PostureResponse) string {
	switch r.TypeID {
	case string(posture.CheckOS):
		s := fmt.Sprintf("OS %s %s", r.Type, r.Version)
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
		return fmt.Sprintf("process %s %s", r.Path, state)
	}
	return r.TypeID
}

// History returns an identity's audit timeline between two times (zero:
// unbounded), in log order.
func (s *Store) History(identityID string, since, until time.Time) ([]posture.HistoryEntry, error) {
	out := []posture.HistoryEntry{}
	err := scanJSON(s.db, historyPrefix(identityID), func(e posture.HistoryEntry) bool {
		if (since.IsZero() || !e.At.Before(since)) && (until.IsZero() || !e.At.After(until)) {
			out = append(out, e)
		}
		return true
	})
	return out, err
}
