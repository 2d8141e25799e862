package store

import (
	"testing"
)

// TestLeaseReclaimBounded checks that a call reclaims every expired lease,
// and that a key whose holders all crash never grows beyond limit slots.
func TestLeaseReclaimBounded(t *testing.T) {
	const limit = 64
	cfg := leaseLimit{limit: limit, ttl: 10}
	var s leaseState
	s.Reset()
	now := int64(1000)
	for range limit {
		if d, id, _ := cfg.acquire(&s, now, 1, false); !d.Allowed() || id == 0 {
			t.Fatalf("acquire: %+v", d)
		}
	}
	now += 10 // all expired, none released
	d, id, _ := cfg.acquire(&s, now, 3, false)
	if !d.Allowed() || id == 0 {
		t.Fatalf("acquire after expiry: %+v", d)
	}
	if s.inflight != 3 || d.Remaining != limit-3 {
		t.Fatalf("inflight %d Remaining %d after reclaiming, want 3 and %d", s.inflight, d.Remaining, limit-3)
	}
	// Crash every holder, round after round: the slots never grow.
	for range 100 {
		now += 10
		for {
			d, _, _ := cfg.acquire(&s, now, 1, false)
			if !d.Allowed() {
				break
			}
		}
		if len(s.slots) > limit {
			t.Fatalf("%d slots for a limit of %d", len(s.slots), limit)
		}
		if s.inflight != limit {
			t.Fatalf("inflight %d, want the full %d", s.inflight, limit)
		}
	}
	if !cfg.recovered(&s, now+10) || cfg.recovered(&s, now+9) {
		t.Fatal("recovered should flip exactly when the last lease expires")
	}
}

// TestLeaseOrderAndIDs checks the expiry order with out-of-order now values
// and that IDs are unique and carry the shared bit.
func TestLeaseOrderAndIDs(t *testing.T) {
	cfg := leaseLimit{limit: 8, ttl: 100}
	var s leaseState
	ids := map[uint64]bool{}
	for _, now := range []int64{50, 40, 60, 45} {
		_, id, exp := cfg.acquire(&s, now, 1, now == 60)
		if id == 0 || ids[id] || exp != now+100 {
			t.Fatalf("acquire at %d: id %x expires %d", now, id, exp)
		}
		if (id&sharedBit != 0) != (now == 60) {
			t.Fatalf("shared bit of %x", id)
		}
		ids[id] = true
	}
	var prev int64
	for i := s.head; i != 0; i = cfg.at(&s, i).next {
		if e := cfg.at(&s, i).expires; e < prev {
			t.Fatalf("live list out of expiry order: %d after %d", e, prev)
		} else {
			prev = e
		}
	}
	// At 145 the leases of 40 and 45 have expired; 8 permits are free once
	// the leases of 50 and 60 expire too, at 160.
	d, _, _ := cfg.acquire(&s, 145, 8, false)
	if d.Allowed() || d.RetryAfter != 15 || d.Remaining != 6 {
		t.Fatalf("cost 8 with 6 free at 145: %+v", d)
	}
}
