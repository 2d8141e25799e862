package mysqlstore

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
)

// FuzzParseReply: whatever the database sends back, parseReply never
// panics and accepts exactly the replies of comma-separated decimal
// int64s that sqlquota.Decode accepts, filling the Result Decode fills
// from those numbers.
func FuzzParseReply(f *testing.F) {
	f.Add("1796156033614806000,1,1,0,4,0,3600000000000")
	f.Add("1796156033614806000,2,1,0,4,0,3600000000000,0,1,0,5000,3600000000000")
	f.Add("1,1,0,2,0,-1,0")
	f.Add("1,,")
	f.Fuzz(func(t *testing.T, reply string) {
		spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
		l, err := sqlquota.NewLimit(spec, "MySQL", false)
		if err != nil {
			t.Fatal(err)
		}
		var req store.Request
		req.Add(1, "a", 1)
		req.Add(1, "b", 1)
		lim := [store.MaxHits]*sqlquota.Limit{l, l}
		var res, want store.Result
		got := parseReply(reply, &req, &res, &lim) == nil
		var vals []int64
		numbers := true
		for _, field := range strings.Split(reply, ",") {
			v, err := strconv.ParseInt(field, 10, 64)
			if err != nil {
				numbers = false
				break
			}
			vals = append(vals, v)
		}
		ok := numbers && sqlquota.Decode(vals, &req, &want, &lim)
		if got != ok {
			t.Fatalf("parseReply accepted %q: %v; as numbers Decode accepted it: %v", reply, got, ok)
		}
		if ok && res != want {
			t.Fatalf("%q: parseReply filled %+v, Decode %+v", reply, res, want)
		}
	})
}
