package queueing

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// bigAdmitter is an Admitter with a limit up to math.MaxInt64, beyond what
// concurrency's semaphores accept, for the queue's own arithmetic. It
// checks without overflow.
type bigAdmitter struct {
	mu          sync.Mutex
	limit, held int64
}

func (b *bigAdmitter) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.limit-b.held {
		return false
	}
	b.held += n
	return true
}

func (b *bigAdmitter) Release(n int64) {
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
}

func (b *bigAdmitter) Limit() int64 { return b.limit }

// TestPartitionRuleNeverWrapsForHugeRequests: the sum of what is held, the
// request and the other partitions' unused guarantees is past MaxInt64 for
// a huge request: it does not fit, and it must not be admitted by a sum
// that wrapped negative.
func TestPartitionRuleNeverWrapsForHugeRequests(t *testing.T) {
	adm := &bigAdmitter{limit: math.MaxInt64}
	q := newQueue(t, adm, WithPartition("a", 0.5), WithPartition("b", 0.5))
	none := mustLane(t, q, Critical, "")
	a := mustLane(t, q, Critical, "a")
	for _, n := range []int64{1 << 62, math.MaxInt64 - 1, math.MaxInt64} {
		if none.TryAcquire(n) {
			t.Errorf("unpartitioned TryAcquire(%d) ate the partitions' guarantees", n)
			none.Release(n)
		}
	}
	if !a.TryAcquire(1) {
		t.Fatal("a could not take a unit of its guarantee")
	}
	for _, n := range []int64{math.MaxInt64 - 1, math.MaxInt64} {
		if a.TryAcquire(n) {
			t.Errorf("a's TryAcquire(%d) with 1 held was admitted", n)
			a.Release(n)
		}
	}
	a.Release(1)
}

// TestWholePartitionGuaranteeAtHugeLimit: a partition of fraction 1 is
// guaranteed the whole limit even when fraction·limit rounds, as a float,
// past MaxInt64: nothing outside it may borrow.
func TestWholePartitionGuaranteeAtHugeLimit(t *testing.T) {
	adm := &bigAdmitter{limit: math.MaxInt64}
	q := newQueue(t, adm, WithPartition("a", 1))
	if mustLane(t, q, Critical, "").TryAcquire(1) {
		t.Fatal("unpartitioned work borrowed from a partition guaranteed the whole limit")
	}
	a := mustLane(t, q, Critical, "a")
	if !a.TryAcquire(math.MaxInt64) {
		t.Fatal("the partition could not take the whole limit")
	}
	a.Release(math.MaxInt64)
}

// TestReserveRuleNeverWrapsForHugeRequests: a request below the reserve's
// priority never gets past the reserve by a wrapped sum.
func TestReserveRuleNeverWrapsForHugeRequests(t *testing.T) {
	adm := &bigAdmitter{limit: math.MaxInt64}
	q := newQueue(t, adm, WithReserve(0.5, Critical))
	low := mustLane(t, q, Sheddable, "")
	if !low.TryAcquire(1) {
		t.Fatal("a low unit within the unreserved half was refused")
	}
	for _, n := range []int64{math.MaxInt64 / 2, math.MaxInt64} {
		if low.TryAcquire(n) {
			t.Errorf("low TryAcquire(%d) with 1 held got into the reserve", n)
			low.Release(n)
		}
	}
	low.Release(1)
}

// TestAcquireAboveLimitFailsAtOnce: a request for more units than the
// Admitter's whole limit can never be served; it fails at once with
// ErrTooLarge instead of waiting at the head of the line (where it would
// hold up everyone behind it) until its max wait or its context ends.
func TestAcquireAboveLimitFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 2)
		q := newQueue(t, sem, WithMaxWait(time.Hour))
		for _, n := range []int64{3, concurrency.MaxSemaphoreLimit + 1, math.MaxInt64} {
			start := time.Now()
			err := q.Acquire(context.Background(), n)
			if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrShed) || time.Since(start) != 0 {
				t.Fatalf("Acquire(%d) of limit 2: %v after %v, want ErrTooLarge at once (not a shed error)", n, err, time.Since(start))
			}
		}
		if st := q.Stats(); st.TooLarge != 3 || st.Shed != 0 || q.Len() != 0 || sem.Inflight() != 0 {
			t.Fatalf("stats %+v, len %d, inflight %d after three requests above the limit", st, q.Len(), sem.Inflight())
		}
		if err := q.Acquire(context.Background(), 2); err != nil {
			t.Fatalf("the whole limit: %v", err)
		}
		q.Release(2)
	})
}

// TestQueuedUnitsNeverWrap: over an Admitter without a Limit, waiters whose
// units together are past MaxInt64 cannot be counted; the one that would
// carry the count over is refused with ErrTooLarge.
func TestQueuedUnitsNeverWrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type bare struct{ Admitter }
		adm := &bigAdmitter{limit: math.MaxInt64}
		q := newQueue(t, bare{adm}, WithDeadlineAware())
		if !q.TryAcquire(1) {
			t.Fatal("first unit refused")
		}
		first := goAcquire(context.Background(), q.def, math.MaxInt64)
		second := goAcquire(context.Background(), q.def, math.MaxInt64)
		if first.finished() || !second.finished() || !errors.Is(second.err, ErrTooLarge) {
			t.Fatalf("first finished %v (%v), second %v: want the first waiting and the second ErrTooLarge",
				first.finished(), first.err, second.err)
		}
		first.cancel()
		synctest.Wait()
		q.Release(1)
	})
}

// TestDrainEstimateSaturates: the expected wait for a huge number of units
// ahead is a huge positive duration, never a wrapped negative one that
// would let every deadline through.
func TestDrainEstimateSaturates(t *testing.T) {
	var r drainRate
	r.start(0)
	r.granted(1000, 1, true) // 1 µs per unit
	for _, units := range []int64{1 << 62, math.MaxInt64} {
		if est, ok := r.wait(units); !ok || est != time.Duration(math.MaxInt64) {
			t.Errorf("wait(%d) = %v, %v; want MaxInt64", units, est, ok)
		}
	}
	if est, _ := r.wait(1000); est != time.Millisecond {
		t.Errorf("wait(1000) = %v, want 1ms", est)
	}
}
