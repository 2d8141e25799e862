package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// propLimit is one limit under test with the admissions it granted.
type propLimit struct {
	id     store.LimitID
	spec   store.Spec
	period int64
	admits map[string][]propAdmit // by key
}

type propAdmit struct {
	at, cost int64
	lease    store.Lease
	released bool
	state    string // the key, or sharedState for the overflow state
}

// sharedState names the overflow state of OverflowShare in the model: a key
// counted there is bounded with every other key counted there.
const sharedState = "\x00shared"

func genSpec(t *rapid.T, name string) store.Spec {
	alg := rapid.SampledFrom([]store.Algorithm{
		store.TokenBucket, store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.Concurrency,
	}).Draw(t, name+"_alg")
	limit := rapid.Int64Range(1, 6).Draw(t, name+"_limit")
	period := time.Duration(rapid.Int64Range(1, 100).Draw(t, name+"_period")) * time.Millisecond
	s := storetest.SpecOf(alg, name, limit, period)
	// Small tables make keys overflow (two keys, room for one).
	s.Capacity = rapid.SampledFrom([]int{0, 1}).Draw(t, name+"_capacity")
	s.Overflow = rapid.SampledFrom([]concurrency.Overflow{concurrency.OverflowReject, concurrency.OverflowShare}).Draw(t, name+"_overflow")
	return s
}

// checkBound reports an admission pattern that breaks the limit's
// guarantee for key at now.
// windowOf numbers the window of length w that t falls in, counting from
// Monday 1970-01-05 00:00 UTC (Calendar's zero value), rounding down.
func windowOf(t, w int64) int64 {
	d := t - int64(4*24*time.Hour)
	q := d / w
	if d%w < 0 {
		q--
	}
	return q
}

func (l *propLimit) checkBound(key string, now int64) error {
	adm := l.admits[key]
	limit, w := l.spec.Limit, l.period
	switch l.spec.Algorithm {
	case store.Concurrency:
		var held int64
		for _, a := range adm {
			if !a.released && a.lease.Expires > now {
				held += a.cost
			}
		}
		if held > limit {
			return fmt.Errorf("%d permits held, limit %d", held, limit)
		}
		return nil
	}
	for i, a := range adm {
		var sum int64
		for _, b := range adm[i:] {
			var in bool
			var bound int64
			switch l.spec.Algorithm {
			case store.TokenBucket: // burst + rate·T
				in, bound = true, limit+limit*(b.at-a.at)/w
			case store.FixedWindow, store.SlidingWindow: // per aligned window: multiples of w from Monday 1970-01-05 UTC
				in, bound = windowOf(a.at, w) == windowOf(b.at, w), limit
			case store.SlidingLog: // any interval shorter than the window
				in, bound = b.at-a.at < w, limit
			}
			if !in {
				continue
			}
			sum += b.cost
			if sum > bound {
				return fmt.Errorf("%v admitted %d in [%d, %d], bound %d", l.spec.Algorithm, sum, a.at, b.at, bound)
			}
		}
	}
	return nil
}

// TestMemoryProperties drives a Memory store with random layered requests,
// time steps and releases, and checks after every step that no limit ever
// admits more than its bound, and that a rejected request leaves every
// limit exactly as it was (all or nothing).
func TestMemoryProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		m := store.NewMemory()
		var limits []*propLimit
		for i := range rapid.IntRange(1, 3).Draw(t, "limits") {
			spec := genSpec(t, fmt.Sprintf("l%d", i))
			id, err := m.Register(ctx, spec)
			if err != nil {
				t.Fatalf("Register(%+v): %v", spec, err)
			}
			period := int64(spec.Window + spec.LeaseTTL)
			if spec.Algorithm == store.TokenBucket {
				period = int64(spec.Rate.Per)
			}
			limits = append(limits, &propLimit{id: id, spec: spec, period: period, admits: map[string][]propAdmit{}})
		}
		keys := []string{"a", "b"}
		states := []string{"a", "b", sharedState}
		now := int64(1) << 40
		peek := func(l *propLimit, key string) ratelimit.Decision {
			var req store.Request
			var res store.Result
			req.Now = now
			req.Add(l.id, key, 0)
			if err := m.Decide(ctx, &req, &res); err != nil || !res.Allowed {
				t.Fatalf("peek: %v %+v", err, res)
			}
			return res.Hits[0].Decision
		}
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("op%d", step)) {
			case 0: // time passes
				now += rapid.Int64Range(0, 120).Draw(t, "dt_ms") * int64(time.Millisecond) / 4
			case 1: // release a lease (or an expired one)
				var held []*propAdmit
				var owners []*propLimit
				for _, l := range limits {
					for _, k := range states {
						for i := range l.admits[k] {
							if a := &l.admits[k][i]; a.lease.Held() && !a.released {
								held, owners = append(held, a), append(owners, l)
							}
						}
					}
				}
				if len(held) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "lease")
				a := held[i]
				err := m.Release(ctx, a.lease, now)
				a.released = true
				if live := a.lease.Expires > now; live && err != nil {
					t.Fatalf("Release of a live lease: %v", err)
				} else if !live && !errors.Is(err, store.ErrLeaseNotHeld) {
					t.Fatalf("Release of an expired lease: %v", err)
				}
				if err := owners[i].checkBound(a.state, now); err != nil {
					t.Fatal(err)
				}
			default: // a layered request
				var req store.Request
				req.Now = now
				type target struct {
					l   *propLimit
					key string
				}
				var targets []target
				for range rapid.IntRange(1, 3).Draw(t, "hits") {
					l := limits[rapid.IntRange(0, len(limits)-1).Draw(t, "limit")]
					key := rapid.SampledFrom(keys).Draw(t, "key")
					req.Add(l.id, key, rapid.Int64Range(0, l.spec.Limit+1).Draw(t, "cost"))
					targets = append(targets, target{l, key})
				}
				before := make([]ratelimit.Decision, len(targets))
				for i, x := range targets {
					before[i] = peek(x.l, x.key)
				}
				var res store.Result
				if err := m.Decide(ctx, &req, &res); err != nil {
					t.Fatalf("Decide: %v", err)
				}
				if !res.Allowed {
					if res.N != res.Decider+1 || res.Hits[res.Decider].Decision.Allowed() {
						t.Fatalf("rejection shape: %+v", res)
					}
					for i, x := range targets {
						after := peek(x.l, x.key)
						if x.l.spec.Algorithm == store.SlidingLog && after.ResetAfter > before[i].ResetAfter {
							// ratelimit.SlidingLog.Refund frees the oldest
							// admission that still counts, not the undone
							// one: the log stays stricter (a later reset),
							// never looser, and Remaining is restored.
							after.ResetAfter = before[i].ResetAfter
						}
						if after != before[i] {
							t.Fatalf("rejected request changed hit %d (%v %q): before %+v after %+v",
								i, x.l.spec.Algorithm, x.key, before[i], after)
						}
					}
					continue
				}
				for i, x := range targets {
					h := req.Hits[i]
					if h.Cost == 0 {
						continue
					}
					state := x.key
					if res.Hits[i].Overflow {
						state = sharedState
					}
					x.l.admits[state] = append(x.l.admits[state], propAdmit{at: now, cost: h.Cost, lease: res.Hits[i].Lease, state: state})
					if err := x.l.checkBound(state, now); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}
