package sqlquota

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestDecodeReadsEachField: an admitted hit, a rejection that can succeed
// later and one that never can (cost over the limit) come out as the
// Decisions the reply describes, the tightest admitted hit the decider.
func TestDecodeReadsEachField(t *testing.T) {
	l, err := NewLimit(store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	lim := [store.MaxHits]*Limit{l, l}
	var req store.Request
	req.Add(1, "a", 1)
	req.Add(1, "b", 1)
	var res store.Result
	if !Decode([]int64{7, 2, 1, 0, 4, 0, 100, 1, 0, 2, 0, 200}, &req, &res, &lim) {
		t.Fatal("a well-formed admission refused")
	}
	if !res.Allowed || res.N != 2 || res.Now != 7 || res.Decider != 1 || res.Hits[1].Decision.Remaining != 2 || res.Hits[0].Decision.ResetAfter != 100 || res.Hits[0].Decision.Limit != 5 {
		t.Fatalf("admission: %+v", res)
	}
	if !Decode([]int64{7, 2, 1, 0, 4, 0, 100, 0, 0, 0, 0, 200}, &req, &res, &lim) {
		t.Fatal("a well-formed rejection refused")
	}
	if res.Allowed || res.Decider != 1 || res.Hits[1].Decision.RetryAfter != 1 {
		t.Fatalf("a rejection with a retry of 0 must still read as one (RetryAfter 1ns): %+v", res)
	}
	if !Decode([]int64{7, 1, 0, 2, 0, 5, 0}, &req, &res, &lim) || res.Allowed || res.Hits[0].Decision.RetryAfter != ratelimit.Never {
		t.Fatalf("a rejection that can never succeed: %+v", res)
	}
	if Decode([]int64{7, 1, 1, 0, 4, 0, 100}, &req, &res, &lim) {
		t.Fatal("an admission of one hit of two accepted")
	}
}

// FuzzDecode: whatever the database sends back, Decode never panics, and a
// reply it accepts describes a well-formed Result: N hits evaluated,
// Allowed exactly when every one was admitted, and a rejection only as the
// last one evaluated.
func FuzzDecode(f *testing.F) {
	enc := func(vs ...int64) []byte {
		b := make([]byte, 0, 8*len(vs))
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	f.Add(enc(1796156033614806000, 1, 1, 0, 4, 0, 3600000000000))
	f.Add(enc(1796156033614806000, 2, 1, 0, 4, 0, 3600000000000, 0, 1, 0, 5000, 3600000000000))
	f.Add(enc(1, 1, 0, 2, 0, -1, 0))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		vals := make([]int64, len(b)/8)
		for i := range vals {
			vals[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		l, err := NewLimit(store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}, "test", false)
		if err != nil {
			t.Fatal(err)
		}
		var req store.Request
		req.Add(1, "a", 1)
		req.Add(1, "b", 1)
		lim := [store.MaxHits]*Limit{l, l}
		var res store.Result
		if !Decode(vals, &req, &res, &lim) {
			return
		}
		if res.N < 1 || res.N > req.N {
			t.Fatalf("accepted %v with N %d", vals, res.N)
		}
		all := true
		for i := range res.N {
			if !res.Hits[i].Decision.Allowed() {
				all = false
				if i != res.N-1 {
					t.Fatalf("accepted %v with a rejection before the last hit", vals)
				}
			}
		}
		if all != res.Allowed || (res.Allowed && res.N != req.N) {
			t.Fatalf("accepted %v: Allowed %v, hits %+v", vals, res.Allowed, res.Hits[:res.N])
		}
	})
}
