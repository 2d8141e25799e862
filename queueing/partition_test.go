package queueing

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"
)

func TestPartitionsGuaranteeAndBorrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSem(t, 10)
		q := newQueue(t, sem, WithPartition("a", 0.5), WithPartition("b", 0.3))
		a := mustLane(t, q, Critical, "a")
		b := mustLane(t, q, Critical, "b")
		none := mustLane(t, q, Critical, "")
		if _, err := q.Lane(Critical, "c"); err == nil {
			t.Fatal("unknown partition accepted")
		}
		// a: guarantee 5, may borrow up to 10 - 3 (b's unused guarantee).
		n := 0
		for a.TryAcquire(1) {
			n++
		}
		if n != 7 {
			t.Fatalf("a took %d, want 7 (b's 3 stay free)", n)
		}
		if none.TryAcquire(1) {
			t.Fatal("unpartitioned work borrowed b's guarantee")
		}
		// a waits at its borrowing limit; b is not held up behind it.
		aw := goAcquire(context.Background(), a, 1)
		bw := goAcquire(context.Background(), b, 2)
		if aw.finished() || !bw.finished() || bw.err != nil {
			t.Fatalf("b (under guarantee) should pass a's waiter: a=%v b=%v", aw.finished(), bw.err)
		}
		if !b.TryAcquire(1) {
			t.Fatal("b could not take its last guaranteed unit")
		}
		if got, _ := q.Held("a"); got != 7 {
			t.Fatalf("Held(a) = %d", got)
		}
		// b gives back one: a's waiter may not take it (it is b's).
		b.Release(1)
		synctest.Wait()
		if aw.finished() {
			t.Fatal("a's waiter took b's guaranteed unit")
		}
		// a gives back one: its own waiter gets it.
		a.Release(1)
		synctest.Wait()
		if !aw.finished() || aw.err != nil {
			t.Fatalf("a's waiter not served: %v", aw.err)
		}
		a.Release(7)
		b.Release(2)
		sem.noneHeld()
	})
}

// The partition rule is one atomic decision: under any concurrent mix the
// global limit holds (checked admitter) and nobody eats another's guarantee.
func TestPartitionsConcurrentNeverExceed(t *testing.T) {
	sem := newSem(t, 8)
	q := newQueue(t, sem, WithPartition("a", 0.5), WithPartition("b", 0.25))
	lanes := []Lane{mustLane(t, q, Critical, "a"), mustLane(t, q, Critical, "b"), mustLane(t, q, Critical, "")}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			l := lanes[g%3]
			for range 2000 {
				if l.TryAcquire(1) {
					l.Release(1)
				}
			}
		})
	}
	wg.Wait()
	sem.noneHeld()
}

// Model-based: every TryAcquire succeeds exactly when the model says so,
// inflight matches what the lanes hold, and borrowing never takes another
// partition's unused guarantee.
func TestPartitionsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 20).Draw(rt, "limit")
		sem := newSem(rt, limit)
		fa := rapid.Float64Range(0.05, 0.6).Draw(rt, "fa")
		fb := rapid.Float64Range(0.05, 1-fa).Draw(rt, "fb")
		q, err := New(sem, WithPartition("a", fa), WithPartition("b", fb))
		if err != nil {
			rt.Fatal(err)
		}
		defer q.Close()
		names := []string{"a", "b", ""}
		fracs := []float64{fa, fb, 0}
		lanes := make([]Lane, 3)
		for i, n := range names {
			lanes[i] = mustLane(rt, q, Critical, n)
		}
		held := make([]int64, 3)
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0: // acquire
				i := rapid.IntRange(0, 2).Draw(rt, "lane")
				n := rapid.Int64Range(1, 4).Draw(rt, "n")
				L := sem.Limit()
				g := func(j int) int64 { return int64(fracs[j] * float64(L)) }
				var total, others int64
				for j := range held {
					total += held[j]
					if j != i && held[j] < g(j) {
						others += g(j) - held[j]
					}
				}
				want := sem.Available() >= n && (held[i]+n <= g(i) || total+n+others <= L)
				got := lanes[i].TryAcquire(n)
				if got != want {
					rt.Fatalf("TryAcquire(%s, %d) = %v, model says %v (held %v, limit %d)", names[i], n, got, want, held, L)
				}
				if got {
					if held[i]+n > g(i) && total+n+others > L {
						rt.Fatalf("borrow took another partition's guarantee")
					}
					held[i] += n
				}
			case 1: // release
				i := rapid.IntRange(0, 2).Draw(rt, "lane")
				if held[i] > 0 {
					n := rapid.Int64Range(1, held[i]).Draw(rt, "n")
					lanes[i].Release(n)
					held[i] -= n
				}
			case 2:
				if err := sem.SetLimit(rapid.Int64Range(1, 20).Draw(rt, "newLimit")); err != nil {
					rt.Fatal(err)
				}
			}
			var sum int64
			for i, n := range names {
				h, _ := q.Held(n)
				if h != held[i] {
					rt.Fatalf("Held(%q) = %d, model %d", n, h, held[i])
				}
				sum += h
			}
			if sem.Inflight() != sum {
				rt.Fatalf("inflight %d, lanes hold %d", sem.Inflight(), sum)
			}
		}
	})
}
