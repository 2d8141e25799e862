package store_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestRequestResetIsAFreshRequest: whatever a request held (hits with keys
// and max waits, a wait, more hits than fit, a negative count), Reset
// leaves exactly the zero request at the new now.
func TestRequestResetIsAFreshRequest(t *testing.T) {
	full := func(n int) *store.Request {
		r := &store.Request{Now: 7, Wait: time.Second}
		for i := range n {
			r.Add(store.LimitID(i+1), "key", int64(i+1))
		}
		for i := range min(n, store.MaxHits) {
			r.Hits[i].MaxWait = time.Millisecond
		}
		return r
	}
	cases := map[string]*store.Request{
		"empty":      {},
		"one hit":    full(1),
		"all hits":   full(store.MaxHits),
		"too many":   full(store.MaxHits + 3),
		"negative N": {N: -2, Now: 3},
	}
	for name, r := range cases {
		r.Reset(42)
		if *r != (store.Request{Now: 42}) {
			t.Errorf("%s: Reset(42) left %+v", name, *r)
		}
	}
}

// TestRequestResetAllocatesNothing: a reused request costs no allocation.
func TestRequestResetAllocatesNothing(t *testing.T) {
	var r store.Request
	if a := testing.AllocsPerRun(100, func() {
		r.Reset(1)
		r.Add(1, "k", 1)
	}); a != 0 {
		t.Errorf("Reset and Add: %v allocations, want 0", a)
	}
}
