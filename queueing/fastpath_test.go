package queueing

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// limited is what the tests below need of an Admitter besides Admitter.
type limited interface {
	SetLimit(limit int64) error
	Inflight() int64
}

// admitterKind is one way a Queue reaches its Admitter.
type admitterKind struct {
	name string
	new  func(t tb, limit int64) (Admitter, limited)
}

// admitterKinds: a *Semaphore called directly (the inlined fast path), a
// semaphore behind the interface with the gated hook, with the plain hook,
// with no hook at all, and the sharded semaphore.
func admitterKinds() []admitterKind {
	sem := func(t tb, limit int64) *concurrency.Semaphore {
		s, err := concurrency.NewSemaphore(limit)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return []admitterKind{
		{"semaphore", func(t tb, l int64) (Admitter, limited) { s := sem(t, l); return s, s }},
		{"gated-hook", func(t tb, l int64) (Admitter, limited) { s := sem(t, l); return gatedHook{s}, s }},
		{"plain-hook", func(t tb, l int64) (Admitter, limited) { s := sem(t, l); return plainHook{s}, s }},
		{"no-hook", func(t tb, l int64) (Admitter, limited) { s := sem(t, l); return noHook{s}, s }},
		{"sharded", func(t tb, l int64) (Admitter, limited) {
			s, err := concurrency.NewShardedSemaphore(l)
			if err != nil {
				t.Fatal(err)
			}
			return s, s
		}},
	}
}

// gatedHook hides the *Semaphore type (no direct calls) but keeps its gated
// hook; plainHook offers only the ungated OnCapacity, and noHook no hook.
type gatedHook struct{ *concurrency.Semaphore }

type plainHook struct {
	s interface {
		Admitter
		capacityNotifier
		limitReader
	}
}

func (p plainHook) TryAcquire(n int64) bool   { return p.s.TryAcquire(n) }
func (p plainHook) Release(n int64)           { p.s.Release(n) }
func (p plainHook) Limit() int64              { return p.s.Limit() }
func (p plainHook) OnCapacity(f func()) error { return p.s.OnCapacity(f) }

type noHook struct {
	s interface {
		Admitter
		limitReader
	}
}

func (p noHook) TryAcquire(n int64) bool { return p.s.TryAcquire(n) }
func (p noHook) Release(n int64)         { p.s.Release(n) }
func (p noHook) Limit() int64            { return p.s.Limit() }

// slowRelease runs before() inside Release, before the units go back: the
// window between the queue's "nobody waits" check and the release.
type slowRelease struct {
	Admitter
	before func()
}

func (s *slowRelease) Release(n int64) {
	s.before()
	s.Admitter.Release(n)
}

// gatedSlow and plainSlow give slowRelease the hook of what it wraps.
type gatedSlow struct {
	*slowRelease
	g gatedNotifier
}

func (g gatedSlow) OnCapacityWhile(w *atomic.Int64, f func()) error {
	return g.g.OnCapacityWhile(w, f)
}

type plainSlow struct {
	*slowRelease
	c capacityNotifier
}

func (p plainSlow) OnCapacity(f func()) error { return p.c.OnCapacity(f) }

// The fast Release checks "nobody waits" before it gives the units back. A
// waiter that arrives in between, and so misses the units, is served by the
// load of the waiter count that follows the release: the Admitter's hook
// makes it, or, without a hook, the queue.
func TestFastReleaseServesWaiterArrivingMeanwhile(t *testing.T) {
	for _, kind := range admitterKinds()[1:] { // a *Semaphore cannot be slowed down
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				adm, sem := kind.new(t, 1)
				var c *call
				var q *Queue
				slow := &slowRelease{Admitter: adm, before: func() {
					if c == nil {
						c = goAcquire(context.Background(), q.def, 1)
					}
				}}
				var wrapped Admitter = slow
				switch a := adm.(type) {
				case gatedNotifier:
					wrapped = gatedSlow{slow, a}
				case capacityNotifier:
					wrapped = plainSlow{slow, a}
				}
				q = newQueue(t, wrapped)
				if !q.TryAcquire(1) {
					t.Fatal("the only permit was not free")
				}
				q.Release(1) // the waiter queues inside, before the unit is back
				synctest.Wait()
				if c == nil || !c.finished() || c.err != nil {
					t.Fatal("a waiter that arrived during the fast Release was not served")
				}
				q.Release(1)
				if sem.Inflight() != 0 || q.Len() != 0 {
					t.Fatalf("inflight %d, len %d", sem.Inflight(), q.Len())
				}
			})
		})
	}
}

// Fast-path callers (TryAcquire, and Acquire that finds room) run flat out
// while waiters arrive, time out, are cancelled, displaced and served, and
// the limit swings between 2 and 5: units held never exceed the largest
// limit, and afterwards nothing is held and nobody waits. Real time and
// real parallelism: the races are those of production.
func TestFastPathHammer(t *testing.T) {
	const maxLimit = 5
	configs := map[string][]Option{
		"fifo":                {WithMaxLength(4)},
		"lifo-maxwait":        {WithOrder(LIFO), WithMaxLength(4), WithMaxWait(time.Millisecond)},
		"adaptive-lifo-codel": {WithOrder(AdaptiveLIFO), WithCoDel(200*time.Microsecond, 2*time.Millisecond)},
	}
	iters := fastPathIters // fewer under -race: see raceEnabled
	if testing.Short() {
		iters = min(iters, 500)
	}
	for _, kind := range admitterKinds() {
		for cname, opts := range configs {
			t.Run(kind.name+"/"+cname, func(t *testing.T) {
				adm, sem := kind.new(t, 3)
				q := newQueue(t, adm, opts...)
				var held atomic.Int64
				take := func(n int64) {
					if v := held.Add(n); v > maxLimit {
						t.Errorf("%d units held, limit never above %d", v, maxLimit)
					}
				}
				give := func(n int64) {
					held.Add(-n)
					q.Release(n)
				}
				var wg sync.WaitGroup
				var served, shed atomic.Int64
				for g := range 3 { // fast-path callers
					wg.Go(func() {
						for i := range iters {
							if i%2 == 0 {
								if q.TryAcquire(1) {
									take(1)
									give(1)
								}
								continue
							}
							switch err := q.Acquire(context.Background(), 1); {
							case err == nil:
								take(1)
								give(1)
							case errors.Is(err, ErrShed):
							default:
								t.Errorf("fast caller %d: %v", g, err)
								return
							}
						}
					})
				}
				for g := range 3 { // waiters: weighted, some cancelled
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 7))
						for range iters / 4 {
							n := int64(1 + rng.IntN(2))
							ctx, cancel := context.WithCancel(context.Background())
							if rng.IntN(3) == 0 {
								go func() { runtime.Gosched(); cancel() }()
							}
							err := q.Acquire(ctx, n)
							cancel()
							switch {
							case err == nil:
								served.Add(1)
								take(n)
								for range rng.IntN(4) {
									runtime.Gosched()
								}
								give(n)
							case errors.Is(err, ErrShed), errors.Is(err, context.Canceled):
								shed.Add(1)
							default:
								t.Errorf("waiter %d: %v", g, err)
								return
							}
						}
					})
				}
				stop := make(chan struct{})
				changer := make(chan struct{})
				go func() { // the limit swings between 2 and 5
					defer close(changer)
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := sem.SetLimit(int64(2 + i%4)); err != nil {
							t.Error(err)
						}
						time.Sleep(50 * time.Microsecond)
					}
				}()
				wg.Wait()
				close(stop)
				<-changer
				if served.Load() == 0 {
					t.Fatal("no waiter was ever served")
				}
				if held.Load() != 0 || sem.Inflight() != 0 || q.Len() != 0 {
					t.Fatalf("at rest: held %d, inflight %d, queued %d", held.Load(), sem.Inflight(), q.Len())
				}
				t.Logf("served %d, shed or cancelled %d, stats %+v", served.Load(), shed.Load(), q.Stats())
			})
		}
	}
}
