package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

var ctx = context.Background()

func mustRegister(t testing.TB, m *store.Memory, spec store.Spec) store.LimitID {
	t.Helper()
	id, err := m.Register(ctx, spec)
	if err != nil {
		t.Fatalf("Register(%+v): %v", spec, err)
	}
	return id
}

func decide(t testing.TB, m *store.Memory, now int64, hits ...store.Hit) store.Result {
	t.Helper()
	req := store.Request{Now: now}
	for _, h := range hits {
		req.Add(h.Limit, h.Key, h.Cost)
	}
	var res store.Result
	if err := m.Decide(ctx, &req, &res); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}

var allAlgorithms = []store.Algorithm{
	store.TokenBucket, store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.Concurrency,
}

// TestMemoryOverflowReject fills a one-key table with a live key: a second
// key is rejected (Overflow, a RetryAfter hint, nothing charged), the live
// key keeps its state, and once it recovers the second key takes its place.
func TestMemoryOverflowReject(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			m := store.NewMemory()
			spec := storetest.SpecOf(alg, "x", 2, time.Second)
			spec.Capacity = 1
			id := mustRegister(t, m, spec)
			now := int64(1) << 40
			a := decide(t, m, now, store.Hit{Limit: id, Key: "a", Cost: 1})
			if !a.Allowed || a.Hits[0].Overflow {
				t.Fatalf("first key: %+v", a.Hits[0])
			}
			b := decide(t, m, now, store.Hit{Limit: id, Key: "b", Cost: 1})
			if b.Allowed || !b.Hits[0].Overflow || b.Decision().RetryAfter <= 0 || b.Hits[0].Lease.Held() {
				t.Fatalf("second key in a full table: %+v", b.Hits[0])
			}
			if peek := decide(t, m, now, store.Hit{Limit: id, Key: "b"}); !peek.Allowed || peek.Decision().Remaining != 2 {
				t.Fatalf("peek of an overflowing key: %+v", peek.Hits[0])
			}
			if again := decide(t, m, now, store.Hit{Limit: id, Key: "a", Cost: 1}); !again.Allowed || again.Decision().Remaining != 0 {
				t.Fatalf("the live key lost its state: %+v", again.Hits[0])
			}
			later := now + int64(4*time.Second) // every state recovered
			if b := decide(t, m, later, store.Hit{Limit: id, Key: "b", Cost: 1}); !b.Allowed || b.Hits[0].Overflow {
				t.Fatalf("second key after the first recovered: %+v", b.Hits[0])
			}
			if st := m.TableStats(id); st.Entries != 1 || st.Capacity != 1 || st.Evictions != 1 || st.Overflows == 0 {
				t.Fatalf("TableStats = %+v", st)
			}
		})
	}
}

// TestMemoryOverflowShare sends keys that do not fit to one shared state,
// which all-or-nothing undoes and leases release like any other.
func TestMemoryOverflowShare(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			m := store.NewMemory()
			spec := storetest.SpecOf(alg, "x", 2, time.Hour)
			spec.Capacity, spec.Overflow = 1, concurrency.OverflowShare
			id := mustRegister(t, m, spec)
			tight := mustRegister(t, m, storetest.SpecOf(store.FixedWindow, "tight", 1, time.Hour))
			now := int64(1) << 40
			decide(t, m, now, store.Hit{Limit: id, Key: "a", Cost: 1})
			b := decide(t, m, now, store.Hit{Limit: id, Key: "b", Cost: 1})
			if !b.Allowed || !b.Hits[0].Overflow {
				t.Fatalf("b on the shared state: %+v", b.Hits[0])
			}
			// c shares b's state: one unit left. A layered request that the
			// tight limit rejects must give it back.
			decide(t, m, now, store.Hit{Limit: tight, Key: "t", Cost: 1})
			if r := decide(t, m, now, store.Hit{Limit: id, Key: "c", Cost: 1}, store.Hit{Limit: tight, Key: "t", Cost: 1}); r.Allowed || r.Decider != 1 {
				t.Fatalf("layered over the shared state: %+v", r)
			}
			c := decide(t, m, now, store.Hit{Limit: id, Key: "c", Cost: 1})
			if !c.Allowed || !c.Hits[0].Overflow || c.Decision().Remaining != 0 {
				t.Fatalf("c on the shared state: %+v", c.Hits[0])
			}
			if d := decide(t, m, now, store.Hit{Limit: id, Key: "d", Cost: 1}); d.Allowed {
				t.Fatalf("the shared state admitted more than its limit: %+v", d.Hits[0])
			}
			if alg == store.Concurrency {
				if err := m.Release(ctx, b.Hits[0].Lease, now); err != nil {
					t.Fatalf("Release of a shared lease: %v", err)
				}
				if err := m.Release(ctx, b.Hits[0].Lease, now); !errors.Is(err, store.ErrLeaseNotHeld) {
					t.Fatalf("second Release of a shared lease: %v", err)
				}
				if d := decide(t, m, now, store.Hit{Limit: id, Key: "d", Cost: 1}); !d.Allowed || !d.Hits[0].Overflow {
					t.Fatalf("after a shared release: %+v", d.Hits[0])
				}
			}
		})
	}
}

// TestMemoryRequestNow rejects a negative Now (the primitives' domain).
func TestMemoryRequestNow(t *testing.T) {
	m := store.NewMemory()
	id := mustRegister(t, m, storetest.SpecOf(store.FixedWindow, "x", 1, time.Second))
	req := store.Request{Now: -1}
	req.Add(id, "k", 1)
	var res store.Result
	if err := m.Decide(ctx, &req, &res); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
		t.Fatalf("Decide with a negative now: %v", err)
	}
}

// TestMemoryLeaseChurn acquires and releases leases from many goroutines on
// a few keys, some holders never releasing (they expire), and checks that
// no key ever holds more than its limit and that a quiet store holds no
// permit: permits are conserved on every path.
func TestMemoryLeaseChurn(t *testing.T) {
	const limit, ttl = 4, int64(1000)
	m := store.NewMemory()
	id := mustRegister(t, m, storetest.SpecOf(store.Concurrency, "c", limit, time.Duration(ttl)))
	gate := mustRegister(t, m, storetest.SpecOf(store.TokenBucket, "gate", 3, time.Duration(50)))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		clock int64 = 1 << 40
	)
	tick := func() int64 { mu.Lock(); defer mu.Unlock(); clock += 7; return clock }
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				key := fmt.Sprint("k", (g+i)%3)
				now := tick()
				req := store.Request{Now: now}
				req.Add(id, key, 1+int64(i%2))
				if i%3 == 0 {
					req.Add(gate, key, 1) // sometimes rejects after the lease was taken
				}
				var res store.Result
				if err := m.Decide(ctx, &req, &res); err != nil {
					t.Error(err)
					return
				}
				if !res.Allowed {
					if res.Hits[0].Lease.Held() {
						t.Error("a rejected request kept its lease")
					}
					continue
				}
				l := res.Hits[0].Lease
				if d := res.Hits[0].Decision; d.Remaining < 0 || d.Remaining > limit-l.Cost {
					t.Errorf("admitted with Remaining %d for cost %d of %d", d.Remaining, l.Cost, limit)
				}
				if i%5 == 4 {
					continue // a "crashed" holder: the lease expires
				}
				if err := m.Release(ctx, l, tick()); err != nil && !errors.Is(err, store.ErrLeaseNotHeld) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for k := range 3 {
		key := fmt.Sprint("k", k)
		if d := decide(t, m, clock+ttl, store.Hit{Limit: id, Key: key}); d.Decision().Remaining != limit || d.Decision().ResetAfter != 0 {
			t.Errorf("quiet key %s: %+v, want all %d permits back", key, d.Decision(), limit)
		}
	}
}

func TestMemoryAllocs(t *testing.T) {
	m := store.NewMemory()
	var ids []store.LimitID
	var steps []int64
	for _, alg := range allAlgorithms {
		// A rate so high that every request fits: the admit path is measured.
		spec := storetest.SpecOf(alg, alg.String(), 1<<20, time.Hour)
		step := int64(1)
		switch alg {
		case store.Concurrency:
			spec.Limit = 1 << 10
		case store.SlidingLog:
			// A log is meant for small limits; its window is the shortest
			// one (ratelimit.MinWindow) and the clock steps a 32nd of it,
			// so every request fits.
			spec.Limit, spec.Window = 64, ratelimit.MinWindow
			step = int64(ratelimit.MinWindow) / 32
		}
		ids = append(ids, mustRegister(t, m, spec))
		steps = append(steps, step)
	}
	now := int64(1) << 40
	for i, alg := range allAlgorithms {
		req := store.Request{Now: now}
		req.Add(ids[i], "warm", 1)
		var res store.Result
		run := func() {
			req.Now += steps[i]
			if err := m.Decide(ctx, &req, &res); err != nil || !res.Allowed {
				t.Fatalf("Decide: %v %+v", err, res.Decision())
			}
			if l := res.Hits[0].Lease; l.Held() {
				if err := m.Release(ctx, l, req.Now); err != nil {
					t.Fatal(err)
				}
			}
		}
		run() // warm: a sliding log's ring, a lease slot
		if a := testing.AllocsPerRun(1000, run); a != 0 {
			t.Errorf("%v: %v allocations per decision, want 0", alg, a)
		}
	}
	// A layered request over every algorithm, and its rejection path.
	req := store.Request{Now: now}
	for _, id := range ids {
		req.Add(id, "warm", 1)
	}
	var res store.Result
	layered := func() {
		req.Now++
		if err := m.Decide(ctx, &req, &res); err != nil {
			t.Fatal(err)
		}
		for i := range res.Hits[:res.N] {
			if l := res.Hits[i].Lease; l.Held() {
				_ = m.Release(ctx, l, req.Now)
			}
		}
	}
	if a := testing.AllocsPerRun(1000, layered); a != 0 {
		t.Errorf("layered: %v allocations per decision, want 0", a)
	}
	tight := mustRegister(t, m, storetest.SpecOf(store.FixedWindow, "tight", 1, time.Hour))
	req.Add(tight, "warm", 2) // exceeds capacity: every request is undone
	if a := testing.AllocsPerRun(1000, layered); a != 0 || res.Allowed {
		t.Errorf("rejected layered: %v allocations per decision (allowed %v), want 0", a, res.Allowed)
	}
}

func BenchmarkMemoryDecide(b *testing.B) {
	for _, alg := range allAlgorithms {
		b.Run(alg.String(), func(b *testing.B) {
			m := store.NewMemory()
			spec := storetest.SpecOf(alg, "x", 1<<20, time.Hour)
			step := int64(1)
			switch alg {
			case store.Concurrency:
				spec.Limit = 1 << 10
			case store.SlidingLog:
				// A decision reads the whole log: keep it small, and its
				// window the shortest (ratelimit.MinWindow) with clock
				// steps of a 16th of it, so most fit.
				spec.Limit, spec.Window = 16, ratelimit.MinWindow
				step = int64(ratelimit.MinWindow) / 16
			}
			id := mustRegister(b, m, spec)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := store.Request{Now: 1 << 40}
				req.Add(id, "k", 1)
				var res store.Result
				for pb.Next() {
					req.Now += step
					if err := m.Decide(ctx, &req, &res); err != nil {
						b.Fatal(err)
					}
					if l := res.Hits[0].Lease; l.Held() {
						_ = m.Release(ctx, l, req.Now)
					}
				}
			})
		})
	}
}

// TestMemoryRegisterWhileDeciding registers limits while other goroutines
// decide on an earlier one (run with -race).
func TestMemoryRegisterWhileDeciding(t *testing.T) {
	m := store.NewMemory()
	first := mustRegister(t, m, storetest.SpecOf(store.FixedWindow, "first", 1000, time.Hour))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				req := store.Request{Now: 1 << 40}
				req.Add(first, fmt.Sprint(g, i%7), 1)
				var res store.Result
				if err := m.Decide(ctx, &req, &res); err != nil || !res.Allowed {
					t.Errorf("Decide: %v %+v", err, res.Decision())
					return
				}
			}
		})
	}
	var ids []store.LimitID
	for i := range 20 {
		spec := storetest.SpecOf(allAlgorithms[i%len(allAlgorithms)], fmt.Sprint("l", i), 3, time.Second)
		spec.Capacity = 16
		ids = append(ids, mustRegister(t, m, spec))
	}
	wg.Wait()
	for i, id := range ids {
		if id != first+store.LimitID(i+1) {
			t.Fatalf("limit %d got id %d, want %d", i, id, first+store.LimitID(i+1))
		}
		if st := m.TableStats(id); st.Capacity != 16 {
			t.Fatalf("limit %d: %+v", i, st)
		}
	}
	if st := m.TableStats(first); st.Capacity != store.DefaultCapacity || st.Entries != 28 {
		t.Fatalf("first limit: %+v, want the default capacity and 28 keys", st)
	}
	if st := m.TableStats(0); st != (concurrency.TableStats{}) {
		t.Fatalf("TableStats of an unknown limit: %+v", st)
	}
}

// TestMemoryUnregister drops a limit of each algorithm with keys in its
// table: TableStats is zero, Limits counts it no more, calls naming it
// fail with ErrUnknownLimit, and its name registers again under a new ID,
// with fresh state.
func TestMemoryUnregister(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			m := store.NewMemory()
			const now = int64(1) << 40
			keep := mustRegister(t, m, storetest.SpecOf(store.FixedWindow, "keep", 5, time.Hour))
			spec := storetest.SpecOf(alg, "x", 2, time.Hour)
			id := mustRegister(t, m, spec)
			var res store.Result
			for _, k := range []string{"a", "b", "c"} {
				res = decide(t, m, now, store.Hit{Limit: id, Key: k, Cost: 2})
			}
			if st := m.TableStats(id); st.Entries != 3 || m.Limits() != 2 {
				t.Fatalf("before: %+v, %d limits", st, m.Limits())
			}
			if err := m.Unregister(ctx, id); err != nil {
				t.Fatal(err)
			}
			if st := m.TableStats(id); st != (concurrency.TableStats{}) || m.Limits() != 1 {
				t.Fatalf("after: %+v, %d limits, want zero stats and 1 limit", st, m.Limits())
			}
			req := store.Request{Now: now}
			req.Add(keep, "a", 1)
			req.Add(id, "a", 1)
			if err := m.Decide(ctx, &req, &res); !errors.Is(err, store.ErrUnknownLimit) {
				t.Fatalf("Decide: %v, want ErrUnknownLimit", err)
			}
			if l := res.Hits[0].Lease; alg == store.Concurrency {
				if err := m.Release(ctx, l, now); !errors.Is(err, store.ErrUnknownLimit) {
					t.Fatalf("Release of %+v: %v, want ErrUnknownLimit", l, err)
				}
			}
			if err := m.Unregister(ctx, id); !errors.Is(err, store.ErrUnknownLimit) || !strings.HasPrefix(err.Error(), "store: ") {
				t.Fatalf("second Unregister: %v, want ErrUnknownLimit", err)
			}
			again := mustRegister(t, m, spec)
			if again <= id {
				t.Fatalf("registered again as %d after %d: an ID reused", again, id)
			}
			if fresh := decide(t, m, now, store.Hit{Limit: again, Key: "c", Cost: 2}); !fresh.Allowed {
				t.Fatalf("the name registered again kept the old state: %+v", fresh.Decision())
			}
			if kept := decide(t, m, now, store.Hit{Limit: keep, Key: "a"}); kept.Decision().Remaining != 5 {
				t.Fatalf("the failed Decide charged another limit: %+v", kept.Decision())
			}
		})
	}
	var zero store.Memory
	if err := zero.Unregister(ctx, 1); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Unregister on an empty store: %v", err)
	}
}

// TestMemoryUnregisterWhileDeciding registers and unregisters limits in
// a tight loop while other goroutines decide on and release leases of the
// newest and the one before it: every call succeeds or fails with
// ErrUnknownLimit, nothing panics (run with -race).
func TestMemoryUnregisterWhileDeciding(t *testing.T) {
	m := store.NewMemory()
	var (
		latest atomic.Uint32
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	first := mustRegister(t, m, storetest.SpecOf(store.Concurrency, "l0", 1<<15, time.Hour))
	latest.Store(uint32(first))
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := store.LimitID(latest.Load())
				req := store.Request{Now: 1 << 40}
				req.Add(id, fmt.Sprint(g, i%5), 1)
				if id > 1 {
					req.Add(id-1, fmt.Sprint(g, i%5), 1)
				}
				var res store.Result
				err := m.Decide(ctx, &req, &res)
				if err != nil {
					if !errors.Is(err, store.ErrUnknownLimit) {
						t.Errorf("Decide: %v", err)
						return
					}
					continue
				}
				for _, h := range res.Hits[:res.N] {
					if err := m.Release(ctx, h.Lease, req.Now); err != nil && h.Lease.Held() && !errors.Is(err, store.ErrUnknownLimit) {
						t.Errorf("Release: %v", err)
						return
					}
				}
			}
		})
	}
	prev := first
	for i := 1; i <= 300; i++ {
		// Names cycle: the last holder of this one was dropped two
		// rounds ago.
		spec := storetest.SpecOf(allAlgorithms[i%len(allAlgorithms)], fmt.Sprint("l", i%3), 1<<15, time.Hour)
		spec.Capacity = 64
		id := mustRegister(t, m, spec)
		latest.Store(uint32(id))
		if err := m.Unregister(ctx, prev); err != nil {
			t.Fatal(err)
		}
		prev = id
	}
	stop.Store(true)
	wg.Wait()
	if n := m.Limits(); n != 1 {
		t.Fatalf("%d limits left, want 1", n)
	}
}

// BenchmarkMemoryDecideLayered decides the rule set of a typical endpoint:
// a token bucket per client IP (1,000 clients), a global fixed window and a
// global concurrency lease, released after each request.
func BenchmarkMemoryDecideLayered(b *testing.B) {
	m := store.NewMemory()
	perIP := mustRegister(b, m, storetest.SpecOf(store.TokenBucket, "ip", 1<<20, time.Hour))
	global := mustRegister(b, m, storetest.SpecOf(store.FixedWindow, "global", 1<<40, time.Hour))
	inflight := mustRegister(b, m, storetest.SpecOf(store.Concurrency, "inflight", 1<<16, time.Minute))
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("ip:%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var (
			req store.Request
			res store.Result
		)
		i := 0
		for pb.Next() {
			i++
			req = store.Request{Now: 1<<40 + int64(i)}
			req.Add(perIP, keys[i%len(keys)], 1)
			req.Add(global, "", 1)
			req.Add(inflight, "", 1)
			if err := m.Decide(ctx, &req, &res); err != nil || !res.Allowed {
				b.Fatalf("Decide: %v %+v", err, res.Decision())
			}
			if err := m.Release(ctx, res.Hits[2].Lease, req.Now); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMemoryDecideForgetsAnEarlierResult reuses one Result, as a pooled
// caller does, with every field of every hit outcome left set by an
// earlier call: what a hit does not set this time (a lease, an overflow, a
// reserved wait) must read zero, never the earlier call's.
func TestMemoryDecideForgetsAnEarlierResult(t *testing.T) {
	m := store.NewMemory()
	rate := mustRegister(t, m, storetest.SpecOf(store.TokenBucket, "rate", 10, time.Second))
	conc := mustRegister(t, m, storetest.SpecOf(store.Concurrency, "conc", 10, time.Second))
	var res store.Result
	for i := range res.Hits {
		res.Hits[i] = store.HitResult{
			Decision: ratelimit.Decision{Limit: 7, Remaining: 7, RetryAfter: 7, ResetAfter: 7},
			Lease:    store.Lease{Limit: conc, Key: "earlier", ID: 7, Cost: 7, Expires: 7},
			Overflow: true, Wait: 7, Reserved: 7,
		}
	}
	req := store.Request{Now: int64(time.Hour)}
	req.Add(rate, "k", 1)
	req.Add(conc, "k", 0) // a peek: no lease
	if err := m.Decide(ctx, &req, &res); err != nil || !res.Allowed || res.N != 2 {
		t.Fatalf("Decide: %v, allowed %v, n %d", err, res.Allowed, res.N)
	}
	for i, h := range res.Hits[:res.N] {
		if h.Lease != (store.Lease{}) || h.Overflow || h.Wait != 0 || h.Reserved != 0 {
			t.Errorf("hit %d keeps an earlier outcome: %+v", i, h)
		}
		if want := (ratelimit.Decision{Limit: 10, Remaining: 10 - int64(1-i), ResetAfter: h.Decision.ResetAfter}); h.Decision != want {
			t.Errorf("hit %d decision %+v, want %+v", i, h.Decision, want)
		}
	}
}

// TestMemoryOneHitRequestIsChecked: a request of one hit, the one Decide
// answers on its shortest path, is refused as any other when it is
// malformed, whatever the algorithm, and charges nothing.
func TestMemoryOneHitRequestIsChecked(t *testing.T) {
	for _, alg := range allAlgorithms {
		m := store.NewMemory()
		id := mustRegister(t, m, storetest.SpecOf(alg, "x", 1, time.Second))
		bad := map[string]store.Request{
			"negative now":  {Now: -1, N: 1, Hits: [store.MaxHits]store.Hit{{Limit: id, Key: "k", Cost: 1}}},
			"negative cost": {Now: 1, N: 1, Hits: [store.MaxHits]store.Hit{{Limit: id, Key: "k", Cost: -1}}},
			"no limit":      {Now: 1, N: 1, Hits: [store.MaxHits]store.Hit{{Key: "k", Cost: 1}}},
			"unknown limit": {Now: 1, N: 1, Hits: [store.MaxHits]store.Hit{{Limit: id + 1, Key: "k", Cost: 1}}},
			"negative wait": {Now: 1, N: 1, Wait: -1, Hits: [store.MaxHits]store.Hit{{Limit: id, Key: "k", Cost: 1}}},
		}
		for name, req := range bad {
			var res store.Result
			if err := m.Decide(ctx, &req, &res); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
				t.Errorf("%v, %s: Decide returned %v, want an error", alg, name, err)
			}
		}
		if res := decide(t, m, 1, store.Hit{Limit: id, Key: "k", Cost: 1}); !res.Allowed {
			t.Errorf("%v: a refused request charged the key: %+v", alg, res.Decision())
		}
	}
}

// TestMemoryOneBucketHitHonoursRequestWait: a token bucket hit alone in a
// request that starts Wait after Now is charged then, as in a longer one.
func TestMemoryOneBucketHitHonoursRequestWait(t *testing.T) {
	m := store.NewMemory()
	id := mustRegister(t, m, storetest.SpecOf(store.TokenBucket, "b", 1, time.Second))
	const wait = 300 * time.Millisecond
	req := store.Request{Now: int64(time.Hour), Wait: wait}
	req.Add(id, "k", 1)
	var res store.Result
	if err := m.Decide(ctx, &req, &res); err != nil || !res.Allowed {
		t.Fatalf("Decide: %v, %+v", err, res.Decision())
	}
	if res.Wait != wait || res.Hits[0].Wait != wait {
		t.Errorf("request wait %v, hit wait %v; want %v for both", res.Wait, res.Hits[0].Wait, wait)
	}
}

// TestMemoryLayeredDecisionsOnLargeTables: requests of two hits on tables
// large enough that Decide prefetches their entries (4 MiB of buckets and
// more) are decided as on small ones: all or nothing, every key its own.
func TestMemoryLayeredDecisionsOnLargeTables(t *testing.T) {
	const capacity = 300_000 // 9 MB of buckets and more for each limit
	for _, alg := range []store.Algorithm{store.TokenBucket, store.FixedWindow, store.SlidingWindow, store.Concurrency} {
		t.Run(alg.String(), func(t *testing.T) {
			m := store.NewMemory()
			wide := storetest.SpecOf(store.TokenBucket, "wide", 1000, time.Hour)
			wide.Capacity = capacity
			narrow := storetest.SpecOf(alg, "narrow", 3, time.Hour)
			narrow.Capacity = capacity
			a, b := mustRegister(t, m, wide), mustRegister(t, m, narrow)
			now := int64(time.Hour)
			for i := range 40 {
				res := decide(t, m, now, store.Hit{Limit: a, Key: fmt.Sprint("a-", i), Cost: 1}, store.Hit{Limit: b, Key: fmt.Sprint("b-", i%10), Cost: 1})
				if want := i < 30; res.Allowed != want {
					t.Fatalf("request %d (b-%d's use %d): allowed %v, want %v", i, i%10, i/10+1, res.Allowed, want)
				}
			}
			// The rejected requests' charges on the wide limit were given
			// back; the admitted ones' stand.
			for i := range 40 {
				res := decide(t, m, now, store.Hit{Limit: a, Key: fmt.Sprint("a-", i), Cost: 1})
				want := int64(1000 - 2)
				if i >= 30 {
					want = 1000 - 1
				}
				if got := res.Hits[0].Decision.Remaining; !res.Allowed || got != want {
					t.Errorf("a-%d: allowed %v, remaining %d, want %d", i, res.Allowed, got, want)
				}
			}
			if n := m.TableStats(a).Entries; n != 40 {
				t.Errorf("the wide limit holds %d keys, want 40", n)
			}
		})
	}
}

// TestMemoryPrefetchChangesNothing: Prefetch of a present or an absent
// key, on a table large enough to be read, of an unknown or the zero
// limit, inserts no key, changes no state and allocates nothing.
func TestMemoryPrefetchChangesNothing(t *testing.T) {
	m := store.NewMemory()
	spec := storetest.SpecOf(store.TokenBucket, "large", 10, time.Hour)
	spec.Capacity = 300_000 // 9 MB of buckets: Prefetch reads them
	id := mustRegister(t, m, spec)
	now := int64(time.Hour)
	decide(t, m, now, store.Hit{Limit: id, Key: "present", Cost: 3})
	prefetch := func() {
		m.Prefetch(id, "present")
		m.Prefetch(id, "absent")
		m.Prefetch(0, "present")
		m.Prefetch(id+100, "present")
	}
	prefetch()
	if n := m.TableStats(id).Entries; n != 1 {
		t.Fatalf("%d keys after Prefetch, want 1", n)
	}
	if res := decide(t, m, now, store.Hit{Limit: id, Key: "present", Cost: 1}); res.Hits[0].Decision.Remaining != 6 {
		t.Errorf("present's remaining %d after Prefetch, want 6", res.Hits[0].Decision.Remaining)
	}
	if a := testing.AllocsPerRun(100, prefetch); a != 0 {
		t.Errorf("Prefetch allocates %v per run", a)
	}
}
