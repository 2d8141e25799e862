package queueing

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/concurrency"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// checked wraps a Semaphore and fails the test if an admission ever takes
// the units held past the limit. It counts the units itself: the
// semaphore's Inflight includes the transient units of a concurrent
// TryAcquire that overshot and is about to undo its add, which a check
// racing it would take for an over-admission. The count rises after the
// semaphore admits and falls before it releases, so it never exceeds the
// units truly held: a count over the limit is a real over-admission. Limits
// change only while the test's goroutines are quiescent.
type checked struct {
	*concurrency.Semaphore
	t    tb
	held *atomic.Int64
}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatal(args ...any)
	Errorf(format string, args ...any)
}

func (c checked) TryAcquire(n int64) bool {
	if !c.Semaphore.TryAcquire(n) {
		return false
	}
	if in, lim := c.held.Add(n), c.Limit(); in > lim {
		c.t.Errorf("admission took the units held to %d over limit %d", in, lim)
	}
	return true
}

func (c checked) Release(n int64) {
	c.held.Add(-n)
	c.Semaphore.Release(n)
}

// noneHeld fails the test unless the semaphore holds no unit: every
// admission was released.
func (c checked) noneHeld() {
	c.t.Helper()
	if n := c.Semaphore.Inflight(); n != 0 {
		c.t.Fatal("inflight ", n, ", want 0: units leaked")
	}
}

func newSem(t tb, limit int64) checked {
	t.Helper()
	s, err := concurrency.NewSemaphore(limit)
	if err != nil {
		t.Fatal(err)
	}
	return checked{s, t, new(atomic.Int64)}
}

func newQueue(t testing.TB, adm Admitter, opts ...Option) *Queue {
	t.Helper()
	q, err := New(adm, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// call is one Acquire running in its own goroutine.
type call struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (c *call) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// goAcquire starts l.Acquire(ctx, n) and lets the bubble settle, so that
// calls started one after another queue in that order.
func goAcquire(ctx context.Context, l Lane, n int64) *call {
	ctx, cancel := context.WithCancel(ctx)
	c := &call{cancel: cancel, done: make(chan struct{})}
	go func() {
		c.err = l.Acquire(ctx, n)
		close(c.done)
	}()
	synctest.Wait()
	return c
}

// order records the order in which calls finish.
type order struct {
	mu  sync.Mutex
	ids []int
}

func (o *order) add(id int) {
	o.mu.Lock()
	o.ids = append(o.ids, id)
	o.mu.Unlock()
}

func mustLane(t tb, q *Queue, p Priority, part string) Lane {
	t.Helper()
	l, err := q.Lane(p, part)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
