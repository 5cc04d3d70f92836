package projections

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
)

// The history record writer gives what encoding/json gives for the same
// entry, for every kind of text and detail.
func TestAppendHistoryMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123000, time.UTC)
	// Each entry with the event that caused it.
	cases := []struct {
		event  posture.Event
		record historyRecord
	}{
		{posture.Event{Seq: 1, At: at, Type: posture.TypePostureRecorded}, historyRecord{Kind: posture.HistoryPosture, APISessionID: "as1",
			Summary: "OS Windows 10.0.19045", Detail: posture.PostureResponse{ID: "c", TypeID: "OS", Type: "Windows", Version: "10.0"}}},
		{posture.Event{Seq: 18446744073709551615, At: at.Truncate(time.Second), Type: "identity.updated"}, historyRecord{Kind: posture.HistoryModel,
			Summary: "quotes \" backslash \\ tab \t newline \n nul \x00 bell \a <b>&amp; unicode é 世界 \u2028"}},
		{posture.Event{Seq: 2, At: at, Type: "x"}, historyRecord{Kind: posture.HistoryAccess, Summary: "policy p: passing -> failing",
			Detail: map[string]string{"to": "failing", "from": "passing", "range": ">=1.2.7 <1.3.0"}}},
		{posture.Event{Seq: 3, At: at, Type: "x"}, historyRecord{Kind: posture.HistorySession, Summary: "invalid \xff utf-8", Detail: []posture.PolicyFailure{}}},
	}
	tx := newTx(nil, &Store{})
	out := []byte{'['}
	want := make([]posture.HistoryEntry, len(cases))
	for i, c := range cases {
		if i > 0 {
			out = append(out, ',')
		}
		tx.event = c.event
		var err error
		if out, err = tx.appendHistory(out, c.record); err != nil {
			t.Fatal(err)
		}
		r := c.record
		want[i] = posture.HistoryEntry{Seq: c.event.Seq, At: c.event.At, Kind: r.Kind, Event: c.event.Type, APISessionID: r.APISessionID, Summary: r.Summary}
		if r.Detail != nil {
			if want[i].Detail, err = raw(r.Detail); err != nil {
				t.Fatal(err)
			}
		}
	}
	out = append(out, ']')
	var got []posture.HistoryEntry
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
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

// TestAppendStringMatchesEncodingJSON: history strings are written byte for
// byte as encoding/json writes them without HTML escaping.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", ">=1.2.7 <1.3.0 & co", "quote \" backslash \\ tab \t nl \n", "\u2028\u2029", "bad \xff utf8", "ctl \x01\x1f", "emoji 😀"} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestJSONLen: jsonLen is what the projection's encoder writes for ASCII
// strings, escapes included.
func TestJSONLen(t *testing.T) {
	for _, s := range []string{"", "/usr/bin/ssh", `C:\Program Files\x.exe`, `<&>"` + "\x01\n\x7f\b\f\r\t\x1f", strings.Repeat("<", 100)} {
		data, err := marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonLen(s); got != len(data) {
			t.Errorf("jsonLen(%q) = %d, the encoder wrote %d bytes: %s", s, got, len(data), data)
		}
	}
}
