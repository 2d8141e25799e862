package store_test

import (
	"errors"
	"math/big"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

var _ store.Updater = (*store.Memory)(nil)

func peekAt(t testing.TB, m *store.Memory, now int64, id store.LimitID, key string) ratelimit.Decision {
	t.Helper()
	r := decide(t, m, now, store.Hit{Limit: id, Key: key})
	return r.Decision()
}

func mustUpdate(t testing.TB, m *store.Memory, id store.LimitID, spec store.Spec) {
	t.Helper()
	if err := m.Update(ctx, id, spec); err != nil {
		t.Fatalf("Update(%d, %+v): %v", id, spec, err)
	}
}

// admitted counts how many of up to max hits of cost 1 on key are admitted
// at now, stopping at the first rejection.
func admitted(t testing.TB, m *store.Memory, now int64, id store.LimitID, key string, max int) int {
	t.Helper()
	for i := range max {
		if r := decide(t, m, now, store.Hit{Limit: id, Key: key, Cost: 1}); !r.Allowed {
			return i
		}
	}
	return max
}

// TestUpdateRaisingDailyQuotaKeepsUsage is the finding: a tenant that used 3
// of a daily quota of 3 gets exactly 1 more when the quota is raised to 4,
// not a fresh 4.
func TestUpdateRaisingDailyQuotaKeepsUsage(t *testing.T) {
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			m := store.NewMemory()
			spec := storetest.SpecOf(alg, "daily", 3, 24*time.Hour)
			id := mustRegister(t, m, spec)
			now := int64(100 * 24 * time.Hour) // a window boundary
			if got := admitted(t, m, now, id, "tenant", 5); got != 3 {
				t.Fatalf("admitted %d of a quota of 3", got)
			}
			spec.Limit = 4
			if alg == store.TokenBucket {
				// The burst is raised; the refill stays 3 a day.
				spec.Rate = ratelimit.Per(3, 24*time.Hour)
			}
			mustUpdate(t, m, id, spec)
			now += int64(time.Minute)
			if got := admitted(t, m, now, id, "tenant", 5); got != 1 {
				t.Fatalf("after raising 3 to 4: admitted %d more, want exactly 1", got)
			}
			if got := admitted(t, m, now, id, "other", 5); got != 4 {
				t.Fatalf("a fresh tenant under the raised quota: admitted %d, want 4", got)
			}
		})
	}
}

// TestUpdateLoweringKeepsUsage: a key that used 4 of 10 gets exactly 1 more
// when the limit is lowered to 5, and none when lowered to 3 (Remaining 0,
// never negative).
func TestUpdateLoweringKeepsUsage(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for _, c := range []struct{ lower, more int64 }{{5, 1}, {4, 0}, {3, 0}} {
				m := store.NewMemory()
				spec := storetest.SpecOf(alg, "x", 10, time.Hour)
				id := mustRegister(t, m, spec)
				now := int64(1000 * time.Hour)
				if r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 4}); !r.Allowed {
					t.Fatalf("4 of 10: %+v", r.Decision())
				}
				spec.Limit = c.lower
				if alg == store.TokenBucket {
					spec.Rate = ratelimit.Per(10, time.Hour) // burst only
				}
				mustUpdate(t, m, id, spec)
				now++
				if r := decide(t, m, now, store.Hit{Limit: id, Key: "k"}); r.Decision().Remaining != c.more || r.Decision().Limit != c.lower {
					t.Fatalf("lowered to %d: peek %+v, want %d remaining of %d", c.lower, r.Decision(), c.more, c.lower)
				}
				if got := admitted(t, m, now, id, "k", 5); int64(got) != c.more {
					t.Fatalf("lowered to %d: admitted %d more, want %d", c.lower, got, c.more)
				}
				if r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1}); r.Allowed || r.Decision().RetryAfter <= 0 {
					t.Fatalf("lowered to %d: over the limit: %+v", c.lower, r.Decision())
				}
			}
		})
	}
}

// TestUpdateLoweredConcurrencyKeepsLeases: 4 leases held of 5, lowered to 2:
// nothing new until fewer than 2 are held; the held leases still release.
func TestUpdateLoweredConcurrencyKeepsLeases(t *testing.T) {
	m := store.NewMemory()
	spec := store.Spec{Name: "c", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Hour}
	id := mustRegister(t, m, spec)
	now := int64(time.Hour)
	var held []store.Lease
	for range 4 {
		r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1})
		if !r.Allowed {
			t.Fatal(r.Decision())
		}
		held = append(held, r.Hits[0].Lease)
	}
	spec.Limit = 2
	mustUpdate(t, m, id, spec)
	for i := range 3 {
		if r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1}); r.Allowed || r.Decision().Remaining != 0 {
			t.Fatalf("%d held of a lowered 2: %+v", 4-i, r.Decision())
		}
		if err := m.Release(ctx, held[i], now); err != nil {
			t.Fatalf("a lease held before Update: %v", err)
		}
	}
	r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1})
	if !r.Allowed || r.Decision().Remaining != 0 {
		t.Fatalf("1 held of 2: %+v, want admitted with 0 left", r.Decision())
	}
}

// TestUpdateLeaseTTLAppliesToNewLeases: leases taken before keep their
// expiry; later ones get the new TTL.
func TestUpdateLeaseTTLAppliesToNewLeases(t *testing.T) {
	m := store.NewMemory()
	spec := store.Spec{Name: "c", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Minute}
	id := mustRegister(t, m, spec)
	now := int64(time.Hour)
	before := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1}).Hits[0].Lease
	spec.LeaseTTL = time.Hour
	mustUpdate(t, m, id, spec)
	after := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1}).Hits[0].Lease
	if before.Expires != now+int64(time.Minute) || after.Expires != now+int64(time.Hour) {
		t.Fatalf("expiries %d and %d, want now+1m and now+1h", before.Expires-now, after.Expires-now)
	}
}

// TestUpdateTokenBucketKeepsDebtInTokens: a rate change keeps the tokens a
// key owes (not the time it owes them for) when the new refill is no faster
// than any the limit had, and from then on refills at the new rate.
func TestUpdateTokenBucketKeepsDebtInTokens(t *testing.T) {
	m := store.NewMemory()
	spec := store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Second)}
	id := mustRegister(t, m, spec)
	now := int64(time.Hour)
	if r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 6}); !r.Allowed {
		t.Fatal(r.Decision())
	}
	// Lowered to 5/s: 6 tokens owed, so 4 left, refilling one per 200ms.
	spec.Rate = ratelimit.Per(5, time.Second)
	mustUpdate(t, m, id, spec)
	if d := peekAt(t, m, now, id, "k"); d.Remaining != 4 || d.ResetAfter != 6*200*time.Millisecond {
		t.Fatalf("after lowering the rate: %+v, want 4 left, full in 1.2s", d)
	}
	if got := admitted(t, m, now, id, "k", 10); got != 4 {
		t.Fatalf("admitted %d, want the 4 left", got)
	}
	r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1})
	if r.Allowed || r.Decision().RetryAfter != 200*time.Millisecond {
		t.Fatalf("empty bucket at 5/s: %+v, want RetryAfter 200ms", r.Decision())
	}
	if r := decide(t, m, now+int64(200*time.Millisecond)-1, store.Hit{Limit: id, Key: "k", Cost: 1}); r.Allowed {
		t.Fatal("admitted 1ns before RetryAfter")
	}
	if r := decide(t, m, now+int64(200*time.Millisecond), store.Hit{Limit: id, Key: "k", Cost: 1}); !r.Allowed {
		t.Fatalf("rejected at RetryAfter: %+v", r.Decision())
	}
	// Raised back to 10/s (no faster than the rate registered): exact again.
	now += int64(200 * time.Millisecond)
	spec.Rate = ratelimit.Per(10, time.Second)
	mustUpdate(t, m, id, spec)
	if d := peekAt(t, m, now, id, "k"); d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Fatalf("raised back to 10/s: %+v, want 0 left, full in 1s", d)
	}
	// Burst lowered to 3 with 10 owed: nothing until 7 have refilled.
	spec.Limit = 3
	mustUpdate(t, m, id, spec)
	if r := decide(t, m, now, store.Hit{Limit: id, Key: "k", Cost: 1}); r.Allowed || r.Decision().RetryAfter != 800*time.Millisecond {
		t.Fatalf("10 owed of a burst of 3: %+v, want RetryAfter 800ms", r.Decision())
	}
}

// TestUpdateTokenBucketFasterRateNeverOverAdmits: raising the rate above any
// the limit had keeps the debt in time (the key is full again at the same
// instant); it may admit fewer than a fresh bucket, never more.
func TestUpdateTokenBucketFasterRateNeverOverAdmits(t *testing.T) {
	m := store.NewMemory()
	spec := store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Second)}
	id := mustRegister(t, m, spec)
	now := int64(time.Hour)
	if got := admitted(t, m, now, id, "k", 20); got != 10 {
		t.Fatalf("admitted %d of 10", got)
	}
	spec.Rate = ratelimit.Per(20, time.Second)
	mustUpdate(t, m, id, spec)
	if d := peekAt(t, m, now, id, "k"); d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Fatalf("after raising the rate: %+v, want empty, full in 1s as before", d)
	}
	// Over the next second the new bucket's bound is 10 + 20·1 = 30 tokens
	// with the 10 taken before: at most 20 more.
	total := 0
	for step := int64(0); step <= int64(time.Second); step += int64(10 * time.Millisecond) {
		total += admitted(t, m, now+step, id, "k", 30)
	}
	if total > 20 || total < 10 {
		t.Fatalf("admitted %d in the second after raising the rate, want 10..20", total)
	}
}

func TestUpdateRejectsWhatCannotChange(t *testing.T) {
	m := store.NewMemory()
	spec := store.Spec{Name: "w", Algorithm: store.FixedWindow, Limit: 3, Window: time.Minute}
	id := mustRegister(t, m, spec)
	now := int64(time.Hour)
	admitted(t, m, now, id, "k", 2)
	for name, change := range map[string]func(s *store.Spec){
		"name":      func(s *store.Spec) { s.Name = "v" },
		"algorithm": func(s *store.Spec) { s.Algorithm = store.SlidingLog },
		"window":    func(s *store.Spec) { s.Window = time.Hour },
		"capacity":  func(s *store.Spec) { s.Capacity = 10 },
		"overflow":  func(s *store.Spec) { s.Overflow = concurrency.OverflowShare },
		"invalid":   func(s *store.Spec) { s.Limit = 0 },
		"rate":      func(s *store.Spec) { s.Rate = ratelimit.Per(1, time.Second) },
	} {
		s := spec
		change(&s)
		err := m.Update(ctx, id, s)
		if err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Fatalf("%s: Update = %v, want an error starting with \"store: \"", name, err)
		}
	}
	// The limit is as it was: 1 left of 3.
	if got := admitted(t, m, now, id, "k", 5); got != 1 {
		t.Fatalf("after rejected updates: admitted %d, want 1", got)
	}
	// The default capacity may be spelled out.
	s := spec
	s.Capacity = store.DefaultCapacity
	mustUpdate(t, m, id, s)
}

func TestUpdateUnknownLimit(t *testing.T) {
	m := store.NewMemory()
	spec := store.Spec{Name: "w", Algorithm: store.FixedWindow, Limit: 3, Window: time.Minute}
	if err := m.Update(ctx, 1, spec); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Update of a limit never registered: %v", err)
	}
	id := mustRegister(t, m, spec)
	if err := m.Unregister(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(ctx, id, spec); !errors.Is(err, store.ErrUnknownLimit) || !strings.HasPrefix(err.Error(), "store: ") {
		t.Fatalf("Update of an unregistered limit: %v", err)
	}
}

// TestUpdateRacingDecideNeverOverAdmits hammers one key from several
// goroutines while another flips the limit between 4 and 7 and back (and a
// token bucket's rate among three): in one
// window (one bucket's burst, one set of leases) no more than 7 are ever
// admitted, and once the last Update (to 4) has returned no decision that
// starts afterwards admits past 4.
func TestUpdateRacingDecideNeverOverAdmits(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for round := range 20 {
				m := store.NewMemory()
				spec := storetest.SpecOf(alg, "x", 4, time.Hour)
				id := mustRegister(t, m, spec)
				now := int64(1000 * time.Hour)
				var (
					wg    sync.WaitGroup
					total atomic.Int64
					stop  atomic.Bool
				)
				for range 4 {
					wg.Go(func() {
						for !stop.Load() {
							req := store.Request{Now: now}
							req.Add(id, "k", 1)
							var res store.Result
							if err := m.Decide(ctx, &req, &res); err != nil {
								t.Error(err)
								return
							}
							if res.Allowed {
								total.Add(1)
							}
						}
					})
				}
				for i := range 50 {
					spec.Limit = []int64{7, 4}[i%2]
					if alg == store.TokenBucket {
						// The rate changes too: every change starts a new
						// clock, anchored by the first decision to reach it.
						spec.Rate = ratelimit.Per([]int64{2, 4, 3}[i%3], time.Hour)
					}
					mustUpdate(t, m, id, spec)
				}
				stop.Store(true)
				wg.Wait()
				if got := total.Load(); got > 7 {
					t.Fatalf("round %d: %d admitted with the limit never above 7", round, got)
				}
				// The limit is 4 now: room only for what 4 leaves.
				more := int64(admitted(t, m, now, id, "k", 10))
				if got := total.Load() + more; got > max(4, total.Load()) {
					t.Fatalf("round %d: %d admitted before, %d after the limit settled at 4", round, total.Load(), more)
				}
			}
		})
	}
}

// updModel is a reference for one key of a limit whose parameters change:
// what the ideal algorithm would allow, to check that Memory never admits
// what it would not (and, where Memory is exact, that it admits what it
// would).
type updModel struct {
	alg    store.Algorithm
	limit  int64
	window int64
	// FixedWindow, SlidingLog: admission times and costs.
	adm []propAdmit
	// TokenBucket: tokens owed at time at, refilled at count per per,
	// kept as an exact fraction debt/per tokens.
	debt  *big.Rat
	at    int64
	count int64
	per   int64
	// next is the count of a rate changed by Update, which takes effect
	// at the limit's first decision after it; 0 for none.
	next int64
	// Concurrency: permits held.
	inflight int64
}

// owed returns the tokens owed at now, refilled at the rate in force.
func (m *updModel) owed(now int64) *big.Rat {
	if now <= m.at {
		return new(big.Rat).Set(m.debt)
	}
	refill := big.NewRat((now-m.at)*m.count, m.per)
	d := new(big.Rat).Sub(m.debt, refill)
	if d.Sign() < 0 {
		d.SetInt64(0)
	}
	return d
}

// allows reports whether the ideal algorithm admits cost at now.
func (m *updModel) allows(now, cost int64) bool {
	switch m.alg {
	case store.FixedWindow:
		var used int64
		for _, a := range m.adm {
			if windowOf(a.at, m.window) == windowOf(now, m.window) { // Calendar{}: from Monday 1970-01-05
				used += a.cost
			}
		}
		return used+cost <= m.limit
	case store.SlidingLog:
		var used int64
		for _, a := range m.adm {
			if a.at > now-m.window {
				used += a.cost
			}
		}
		return used+cost <= m.limit
	case store.TokenBucket:
		after := new(big.Rat).Add(m.owed(now), big.NewRat(cost, 1))
		return after.Cmp(big.NewRat(m.limit, 1)) <= 0
	case store.Concurrency:
		return m.inflight+cost <= m.limit
	}
	return false
}

func (m *updModel) charge(now, cost int64) {
	switch m.alg {
	case store.TokenBucket:
		m.debt = new(big.Rat).Add(m.owed(now), big.NewRat(cost, 1))
		m.at = max(m.at, now)
	case store.Concurrency:
		m.inflight += cost
	default:
		m.adm = append(m.adm, propAdmit{at: now, cost: cost})
	}
}

// TestUpdateNeverLooserThanModel runs one key through random decisions,
// releases, clock steps and Updates of its limit (and of a token bucket's
// rate), and checks every decision against the ideal algorithm under the
// parameters in force: Memory never admits what the ideal one would not;
// fixed windows and leases decide exactly as it does, and a sliding log
// admits whenever the ideal one would with nothing left in its window.
func TestUpdateNeverLooserThanModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alg := rapid.SampledFrom([]store.Algorithm{store.FixedWindow, store.SlidingLog, store.TokenBucket, store.Concurrency}).Draw(t, "alg")
		window := int64(ratelimit.MinWindow) + rapid.Int64Range(0, 990).Draw(t, "window")
		limit := rapid.Int64Range(1, 8).Draw(t, "limit")
		spec := store.Spec{Name: "p", Algorithm: alg, Limit: limit}
		m := &updModel{alg: alg, limit: limit, window: window, debt: new(big.Rat), count: limit, per: window}
		switch alg {
		case store.TokenBucket:
			spec.Rate = ratelimit.Per(limit, time.Duration(window))
			// The model refills at the exact rate; Memory rounds the
			// interval up, which only slows it.
		case store.Concurrency:
			spec.LeaseTTL = time.Hour
		default:
			spec.Window = time.Duration(window)
		}
		mem := store.NewMemory()
		id, err := mem.Register(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		now := int64(1) << 30
		var leases []store.Lease
		t.Repeat(map[string]func(*rapid.T){
			"decide": func(t *rapid.T) {
				cost := rapid.Int64Range(1, 3).Draw(t, "cost")
				if m.next != 0 {
					// A new rate takes effect at this decision: the tokens
					// owed so far were refilled at the old one.
					m.debt, m.at = m.owed(now), max(m.at, now)
					m.count, m.next = m.next, 0
				}
				want := m.allows(now, cost)
				req := store.Request{Now: now}
				req.Add(id, "k", cost)
				var res store.Result
				if err := mem.Decide(ctx, &req, &res); err != nil {
					t.Fatal(err)
				}
				if res.Allowed && !want {
					t.Fatalf("%v admitted %d at %d, over the ideal limit of %d", alg, cost, now, m.limit)
				}
				exact := alg == store.FixedWindow || alg == store.Concurrency
				if exact && res.Allowed != want {
					t.Fatalf("%v: admitted = %v at %d, the ideal algorithm says %v", alg, res.Allowed, now, want)
				}
				if alg == store.SlidingLog && !res.Allowed && want {
					// Stricter than ideal only while entries of an earlier
					// limit still count: never when the window is empty.
					empty := true
					for _, a := range m.adm {
						empty = empty && a.at <= now-window
					}
					if empty {
						t.Fatalf("sliding log with an empty window rejected %d at %d: %+v", cost, now, res.Decision())
					}
				}
				if res.Allowed {
					m.charge(now, cost)
					if l := res.Hits[0].Lease; l.Held() {
						leases = append(leases, l)
					}
				}
			},
			"release": func(t *rapid.T) {
				if len(leases) == 0 {
					t.Skip("no lease held")
				}
				i := rapid.IntRange(0, len(leases)-1).Draw(t, "lease")
				if err := mem.Release(ctx, leases[i], now); err != nil {
					t.Fatal(err)
				}
				m.inflight -= leases[i].Cost
				leases = slices.Delete(leases, i, i+1)
			},
			"advance": func(t *rapid.T) { now += rapid.Int64Range(0, window).Draw(t, "dt") },
			"update": func(t *rapid.T) {
				next := spec
				next.Limit = rapid.Int64Range(1, 8).Draw(t, "new limit")
				if alg == store.TokenBucket && rapid.Bool().Draw(t, "new rate") {
					// No faster than the registered rate: the range where
					// the debt is kept in tokens exactly.
					next.Rate = ratelimit.Per(rapid.Int64Range(1, limit).Draw(t, "count"), time.Duration(window))
				}
				if err := mem.Update(ctx, id, next); err != nil {
					t.Fatal(err)
				}
				if alg == store.TokenBucket && next.Rate != spec.Rate {
					m.next = next.Rate.Count
				}
				spec, m.limit = next, next.Limit
			},
		})
	})
}
