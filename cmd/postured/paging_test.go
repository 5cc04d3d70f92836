package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestListsReturnAtMost500: limit=-1 and a filter's "limit none" (no limit
// to OpenZiti clients) answer at most 500 items, as docs/api.md says, with
// the total count of all of them.
func TestListsReturnAtMost500(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	const extra = 520
	w := &api.Writer{Log: n.elog, Barrier: n.store, Now: time.Now}
	now := time.Now()
	err := w.ModelContext(t.Context(), api.Stamp{Actor: "test"}, func() ([]posture.Payload, error) {
		out := make([]posture.Payload, extra)
		for i := range out {
			out[i] = posture.Created[posture.Identity]{Entity: posture.Identity{ID: posture.NewID(), Name: "device-" + posture.NewID(),
				Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: now, UpdatedAt: now}}
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{"limit=-1", "limit=100000", "filter=" + url.QueryEscape("true limit none"), "limit=-1&offset=10"} {
		r := n.do(t, http.MethodGet, mgmt+"/identities?"+query, admin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, r.Status, r.Body)
		}
		var env struct {
			Data []json.RawMessage `json:"data"`
			Meta api.Meta          `json:"meta"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatal(err)
		}
		if p := env.Meta.Pagination; len(env.Data) != api.MaxLimit || p.Limit != api.MaxLimit || p.TotalCount != extra+1 {
			t.Errorf("%s: %d items, pagination %+v; want %d items of %d", query, len(env.Data), p, api.MaxLimit, extra+1)
		}
	}
}
