package adaptive

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/queueing"
)

// With a fair-share queue a permit freed by a tenant that holds the whole
// limit goes to another tenant's waiter, not to its own older one.
func TestLimiterFairShareServesThePoorerTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newFixed(t, 2, WithQueue(queueing.WithFairShare()))
		if !l.FairShare() {
			t.Fatal("FairShare() false with a fair-share queue")
		}
		noisy := Request{Tenant: "noisy"}
		a, err1 := l.TryAcquireAt(1, noisy)
		b, err2 := l.TryAcquireAt(1, noisy)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		got := make(chan string, 2)
		for _, who := range []string{"noisy", "quiet"} {
			go func() {
				tok, err := l.Acquire(context.Background(), Request{Tenant: who})
				if err != nil {
					t.Error(err)
					return
				}
				got <- who
				tok.Done(Ignore)
			}()
			synctest.Wait() // noisy's waiter first in line
		}
		a.DoneAt(2, Ignore)
		if first := <-got; first != "quiet" {
			t.Fatalf("the freed permit went to %s", first)
		}
		b.DoneAt(2, Ignore)
		<-got
		synctest.Wait()
		mustQuiet(t, l)
		if _, err := l.TryAcquireAt(3, Request{Tenant: "x", Weight: queueing.MaxWeight + 1}); err == nil {
			t.Fatal("weight above MaxWeight accepted")
		}
	})
}

func TestLimiterWithoutFairShareIgnoresTenant(t *testing.T) {
	l, _ := newFixed(t, 1)
	if l.FairShare() {
		t.Fatal("FairShare() true without fair share")
	}
	tok, err := l.TryAcquireAt(1, Request{Tenant: "a", Weight: -5})
	if err != nil {
		t.Fatal(err)
	}
	tok.DoneAt(2, Ignore)
	mustQuiet(t, l)
}
