package mysqlstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

// FuzzParseReply: whatever the database sends back, parseReply never
// panics, and a reply it accepts describes a well-formed Result: N hits
// evaluated, Allowed exactly when every one was admitted, and a rejection
// only as the last one evaluated.
func FuzzParseReply(f *testing.F) {
	f.Add("1796156033614806000,1,1,0,4,0,3600000000000")
	f.Add("1796156033614806000,2,1,0,4,0,3600000000000,0,1,0,5000,3600000000000")
	f.Add("1,1,0,2,0,-1,0")
	f.Add("1,,")
	f.Fuzz(func(t *testing.T, reply string) {
		spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
		l, err := newLimit(spec)
		if err != nil {
			t.Fatal(err)
		}
		var req store.Request
		req.Add(1, "a", 1)
		req.Add(1, "b", 1)
		lim := [store.MaxHits]*sqlquota.Limit{l, l}
		var res store.Result
		if parseReply(reply, &req, &res, &lim) != nil {
			return
		}
		if res.N < 1 || res.N > req.N {
			t.Fatalf("accepted %q with N %d", reply, res.N)
		}
		all := true
		for i := range res.N {
			if !res.Hits[i].Decision.Allowed() {
				all = false
				if i != res.N-1 {
					t.Fatalf("accepted %q with a rejection before the last hit", reply)
				}
			}
		}
		if all != res.Allowed || (res.Allowed && res.N != req.N) {
			t.Fatalf("accepted %q: Allowed %v, hits %+v", reply, res.Allowed, res.Hits[:res.N])
		}
	})
}
