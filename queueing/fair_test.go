package queueing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"
)

func mustTenant(t tb, l Lane, name string, weight int) Lane {
	t.Helper()
	tl, err := l.Tenant(name, weight)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestFairShareOptionErrors(t *testing.T) {
	sem := newSem(t, 4)
	if _, err := New(sem, WithFairShare(), WithPartition("a", 0.5)); err == nil {
		t.Fatal("fair share with partitions accepted")
	}
	if _, err := New(struct{ Admitter }{sem}, WithFairShare()); err == nil {
		t.Fatal("fair share over an Admitter without a limit accepted")
	}
	plain := newQueue(t, sem)
	if plain.FairShare() {
		t.Fatal("plain queue reports fair share")
	}
	if _, err := mustLane(t, plain, Critical, "").Tenant("a", 1); err == nil {
		t.Fatal("Tenant on a queue without fair share accepted")
	}
	sem2 := newSem(t, 4)
	q := newQueue(t, sem2, WithFairShare())
	if !q.FairShare() {
		t.Fatal("fair queue does not report fair share")
	}
	for _, w := range []int{0, -1, MaxWeight + 1, math.MaxInt} {
		if _, err := mustLane(t, q, Critical, "").Tenant("a", w); err == nil {
			t.Fatalf("weight %d accepted", w)
		}
	}
}

// Capacity nobody else wants is lent whole; a tenant that comes back is
// served at the next release, before the borrower's older waiters.
func TestFairShareLendsIdleCapacityAndTakesItBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 4)
		q := newQueue(t, sem, WithFairShare())
		base := mustLane(t, q, Critical, "")
		a, b := mustTenant(t, base, "a", 1), mustTenant(t, base, "b", 1)
		for range 4 {
			if !a.TryAcquire(1) {
				t.Fatal("a could not borrow idle capacity")
			}
		}
		aw := goAcquire(context.Background(), a, 1) // a's waiter, older
		bw := goAcquire(context.Background(), b, 1)
		if b.TryAcquire(1) {
			t.Fatal("b passed a full admitter")
		}
		a.Release(1)
		synctest.Wait()
		if !bw.finished() || bw.err != nil || aw.finished() {
			t.Fatalf("the release went to the borrower: b done=%v err=%v, a done=%v", bw.finished(), bw.err, aw.finished())
		}
		if got := q.TenantHeld("a"); got != 3 {
			t.Fatalf("a holds %d, want 3", got)
		}
		a.Release(1) // a (3) and b (1): a's own waiter now, b has nothing waiting
		synctest.Wait()
		if !aw.finished() || aw.err != nil {
			t.Fatalf("a's waiter not served: %v", aw.err)
		}
		a.Release(3)
		b.Release(1)
		if sem.Inflight() != 0 || q.Stats().Tenants != 0 {
			t.Fatalf("inflight %d, tenants %d after all released", sem.Inflight(), q.Stats().Tenants)
		}
	})
}

// Two tenants that always wait end up holding the limit in proportion to
// their weights, whoever started with it.
func TestFairShareWeightsSplitTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 6)
		q := newQueue(t, sem, WithFairShare())
		base := mustLane(t, q, Critical, "")
		heavy, light := mustTenant(t, base, "heavy", 2), mustTenant(t, base, "light", 1)
		for range 6 {
			light.TryAcquire(1) // light borrowed everything
		}
		held := map[string]int{"light": 6}
		lanes := map[string]Lane{"heavy": heavy, "light": light}
		var calls []*call
		names := []string{}
		for range 8 {
			for _, n := range []string{"heavy", "light"} {
				calls = append(calls, goAcquire(context.Background(), lanes[n], 1))
				names = append(names, n)
			}
		}
		// Each round one unit of whoever holds most per weight is released.
		for range 12 {
			victim := "light"
			if held["heavy"] > 2*held["light"] {
				victim = "heavy"
			}
			lanes[victim].Release(1)
			held[victim]--
			synctest.Wait()
			for i, c := range calls {
				if c != nil && c.finished() {
					held[names[i]]++
					calls[i] = nil
				}
			}
		}
		if held["heavy"] != 4 || held["light"] != 2 {
			t.Fatalf("held %v, want heavy 4 light 2 (weights 2:1 of 6)", held)
		}
		if q.TenantHeld("heavy") != 4 || q.TenantHeld("light") != 2 {
			t.Fatalf("queue says heavy %d light %d", q.TenantHeld("heavy"), q.TenantHeld("light"))
		}
		for _, c := range calls {
			if c != nil {
				c.cancel()
			}
		}
		synctest.Wait()
		heavy.Release(4)
		light.Release(2)
		if sem.Inflight() != 0 || q.Stats().Tenants != 0 {
			t.Fatalf("inflight %d, tenants %d", sem.Inflight(), q.Stats().Tenants)
		}
	})
}

// Priority comes before fairness: a poorer tenant's sheddable waiter waits
// behind a richer tenant's critical one.
func TestFairShareServesHigherPriorityFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 2)
		q := newQueue(t, sem, WithFairShare())
		rich := mustTenant(t, mustLane(t, q, Critical, ""), "rich", 1)
		poor := mustTenant(t, mustLane(t, q, Sheddable, ""), "poor", 1)
		rich.TryAcquire(2)
		pw := goAcquire(context.Background(), poor, 1)
		rw := goAcquire(context.Background(), rich, 1)
		rich.Release(1)
		synctest.Wait()
		if !rw.finished() || pw.finished() {
			t.Fatalf("critical done=%v, sheddable done=%v", rw.finished(), pw.finished())
		}
		rich.Release(2)
		synctest.Wait()
		if !pw.finished() || pw.err != nil {
			t.Fatalf("sheddable waiter not served: %v", pw.err)
		}
		poor.Release(1)
	})
}

// A tenant that fills the queue loses its own newest waiter to another
// tenant's newcomer; it is the one turned away when it asks for more.
func TestFairShareFullQueueShedsTheFloodingTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 2)
		q := newQueue(t, sem, WithFairShare(), WithMaxLength(3))
		base := mustLane(t, q, Critical, "")
		noisy, quiet := mustTenant(t, base, "noisy", 1), mustTenant(t, base, "quiet", 1)
		noisy.TryAcquire(2)
		var ws []*call
		for range 3 {
			ws = append(ws, goAcquire(context.Background(), noisy, 1))
		}
		if err := noisy.Acquire(context.Background(), 1); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("the flooding tenant's fourth waiter: %v, want ErrQueueFull", err)
		}
		qw := goAcquire(context.Background(), quiet, 1)
		if !ws[2].finished() || !errors.Is(ws[2].err, ErrDisplaced) {
			t.Fatalf("noisy's newest waiter: done=%v err=%v, want ErrDisplaced", ws[2].finished(), ws[2].err)
		}
		if qw.finished() {
			t.Fatalf("quiet's waiter finished early: %v", qw.err)
		}
		// 2 noisy, 1 quiet: displacing one more would leave quiet ahead, so
		// quiet's second is turned away.
		if err := quiet.Acquire(context.Background(), 1); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("quiet's second waiter: %v, want ErrQueueFull", err)
		}
		noisy.Release(1)
		synctest.Wait()
		if !qw.finished() || qw.err != nil {
			t.Fatalf("quiet not served first: %v", qw.err)
		}
		for _, c := range ws[:2] {
			c.cancel()
		}
		synctest.Wait()
		quiet.Release(1)
		noisy.Release(1)
		if s := q.Stats(); s.Displaced != 1 || s.QueueFull != 2 || s.Tenants != 0 || sem.Inflight() != 0 {
			t.Fatalf("stats %+v, inflight %d", s, sem.Inflight())
		}
	})
}

func TestFairShareReleaseBeyondTenantPanics(t *testing.T) {
	sem := newSem(t, 4)
	q := newQueue(t, sem, WithFairShare())
	base := mustLane(t, q, Critical, "")
	a, b := mustTenant(t, base, "a", 1), mustTenant(t, base, "b", 1)
	a.TryAcquire(2)
	defer func() {
		if recover() == nil {
			t.Fatal("releasing another tenant's units did not panic")
		}
		a.Release(2)
	}()
	b.Release(1)
}

// Model-based, in virtual time: unit requests of one priority from a few
// weighted tenants, released and cancelled at random. After each step the
// queue is exactly where the model says: each release goes to the oldest
// waiter of the tenant holding least per weight, no waiter waits while a
// unit is free, the limit holds, and only busy tenants are tracked.
func TestFairShareProperty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(rt *rapid.T) {
			limit := rapid.Int64Range(1, 6).Draw(rt, "limit")
			sem := newSem(rt, limit)
			q, err := New(sem, WithFairShare())
			if err != nil {
				rt.Fatal(err)
			}
			defer q.Close()
			const nt = 3
			weights := make([]int, nt)
			lanes := make([]Lane, nt)
			base := mustLane(rt, q, Critical, "")
			for i := range nt {
				weights[i] = rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("w%d", i))
				lanes[i] = mustTenant(rt, base, fmt.Sprint("t", i), weights[i])
			}
			type pending struct {
				c      *call
				tenant int
			}
			var queue []pending // model: waiters in arrival order
			held := make([]int64, nt)
			var total int64
			expect := func() int { // the waiter the model serves next
				best := -1
				for i, p := range queue {
					if best < 0 || held[p.tenant]*int64(weights[queue[best].tenant]) < held[queue[best].tenant]*int64(weights[p.tenant]) {
						best = i
					}
				}
				return best
			}
			for range rapid.IntRange(1, 40).Draw(rt, "steps") {
				switch rapid.IntRange(0, 2).Draw(rt, "op") {
				case 0:
					i := rapid.IntRange(0, nt-1).Draw(rt, "tenant")
					c := goAcquire(context.Background(), lanes[i], 1)
					if total < limit && len(queue) == 0 {
						if !c.finished() || c.err != nil {
							rt.Fatalf("free unit not taken at once: %v", c.err)
						}
						held[i]++
						total++
					} else {
						if c.finished() {
							rt.Fatalf("admitted past a full limit or a waiter: %v", c.err)
						}
						queue = append(queue, pending{c, i})
					}
				case 1:
					var busy []int
					for i := range nt {
						if held[i] > 0 {
							busy = append(busy, i)
						}
					}
					if len(busy) == 0 {
						continue
					}
					i := busy[rapid.IntRange(0, len(busy)-1).Draw(rt, "releaser")]
					lanes[i].Release(1)
					held[i]--
					total--
					next := expect() // granted after the release
					synctest.Wait()
					if next >= 0 {
						p := queue[next]
						if !p.c.finished() || p.c.err != nil {
							rt.Fatalf("model serves tenant %d (held %v, weights %v); it was not served: %v", p.tenant, held, weights, p.c.err)
						}
						queue = append(queue[:next], queue[next+1:]...)
						held[p.tenant]++
						total++
					}
				case 2:
					if len(queue) == 0 {
						continue
					}
					k := rapid.IntRange(0, len(queue)-1).Draw(rt, "cancel")
					queue[k].c.cancel()
					synctest.Wait()
					if !errors.Is(queue[k].c.err, context.Canceled) {
						rt.Fatalf("cancelled waiter: %v", queue[k].c.err)
					}
					queue = append(queue[:k], queue[k+1:]...)
				}
				for _, p := range queue {
					if p.c.finished() {
						rt.Fatalf("a waiter the model still has finished: %v", p.c.err)
					}
				}
				busy := 0
				for i := range nt {
					if q.TenantHeld(fmt.Sprint("t", i)) != held[i] {
						rt.Fatalf("tenant %d holds %d, model %d", i, q.TenantHeld(fmt.Sprint("t", i)), held[i])
					}
					waits := false
					for _, p := range queue {
						waits = waits || p.tenant == i
					}
					if held[i] > 0 || waits {
						busy++
					}
				}
				if sem.Inflight() != total || q.Stats().Tenants != busy {
					rt.Fatalf("inflight %d (model %d), tenants %d (model %d)", sem.Inflight(), total, q.Stats().Tenants, busy)
				}
			}
			for _, p := range queue {
				p.c.cancel()
			}
			synctest.Wait()
			for i := range nt {
				lanes[i].Release(held[i])
			}
			if sem.Inflight() != 0 || q.Stats().Tenants != 0 {
				rt.Fatalf("quiet queue: inflight %d, tenants %d", sem.Inflight(), q.Stats().Tenants)
			}
		})
	})
}

// Concurrent tenants never take the limit past its bound, and a quiet
// queue tracks no tenant.
func TestFairShareConcurrentNeverExceed(t *testing.T) {
	sem := newSem(t, 5)
	q := newQueue(t, sem, WithFairShare(), WithMaxLength(math.MaxInt))
	base := mustLane(t, q, Critical, "")
	var wg sync.WaitGroup
	for g := range 8 {
		l := mustTenant(t, base, fmt.Sprint("t", g%3), g%3+1)
		wg.Go(func() {
			for i := range 300 {
				n := int64(i%2 + 1)
				if err := l.Acquire(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				l.Release(n)
			}
		})
	}
	wg.Wait()
	if sem.Inflight() != 0 || q.Stats().Tenants != 0 {
		t.Fatalf("inflight %d, tenants %d", sem.Inflight(), q.Stats().Tenants)
	}
}

// Tenant lanes cost no allocation: making one, and taking and giving back
// units through it, once its tenant's entry has been made and freed.
func TestFairShareAllocatesNothing(t *testing.T) {
	sem := newSem(t, 4)
	q := newQueue(t, sem, WithFairShare())
	base := mustLane(t, q, Critical, "")
	names := []string{"a", "b", "c"}
	for _, n := range names { // warm: the entries exist in the free list
		l := mustTenant(t, base, n, 1)
		l.TryAcquire(1)
	}
	for _, n := range names {
		mustTenant(t, base, n, 1).Release(1)
	}
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range names {
			l, _ := base.Tenant(n, 2)
			if !l.TryAcquire(1) {
				t.Fatal("no room")
			}
			l.Release(1)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}
