package projections

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
)

// The history record writer gives what encoding/json gives for the same
// entry, for every kind of text and detail.
func TestAppendHistoryMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123000, time.UTC)
	records := []historyRecord{
		{Seq: 1, At: at, Kind: posture.HistoryPosture, Event: posture.TypePostureRecorded, APISessionID: "as1",
			Summary: "OS Windows 10.0.19045", Detail: posture.PostureResponse{ID: "c", TypeID: "OS", Type: "Windows", Version: "10.0"}},
		{Seq: 18446744073709551615, At: at.Truncate(time.Second), Kind: posture.HistoryModel, Event: "identity.updated",
			Summary: "quotes \" backslash \\ tab \t newline \n nul \x00 bell \a <b>&amp; unicode é 世界 \u2028"},
		{Seq: 2, At: at, Kind: posture.HistoryAccess, Event: "x", Summary: "policy p: passing -> failing",
			Detail: map[string]string{"to": "failing", "from": "passing", "range": ">=1.2.7 <1.3.0"}},
		{Seq: 3, At: at, Kind: posture.HistorySession, Event: "x", Summary: "invalid \xff utf-8", Detail: []posture.PolicyFailure{}},
	}
	tx := newTx(nil, &Store{})
	out, err := tx.appendHistory(nil, records[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records[1:] {
		out = append(out, ',')
		if out, err = tx.appendHistory(out, r); err != nil {
			t.Fatal(err)
		}
	}
	out = append([]byte{'['}, append(out, ']')...)
	var got []posture.HistoryEntry
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := make([]posture.HistoryEntry, len(records))
	for i, r := range records {
		want[i] = posture.HistoryEntry{Seq: r.Seq, At: r.At, Kind: r.Kind, Event: r.Event, APISessionID: r.APISessionID, Summary: r.Summary}
		if r.Detail != nil {
			want[i].Detail = raw(r.Detail)
		}
	}
	// Through encoding/json, as the API reads it.
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var wantDecoded []posture.HistoryEntry
	if err := json.Unmarshal(data, &wantDecoded); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantDecoded, got, cmp.Comparer(func(a, b json.RawMessage) bool { return jsonEqual(t, a, b) })); diff != "" {
		t.Errorf("history records differ (-encoding/json +appendHistory):\n%s", diff)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return cmp.Equal(x, y)
}
