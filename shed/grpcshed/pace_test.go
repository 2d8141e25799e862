package grpcshed

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClientPacesCallsToEachTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stamps{}
		cl := mustClient(t, WithPace(2, time.Second))
		a := newRig(t, &health{check: st.check}).dialAs(t, "passthrough:///a", through(cl)...)
		b := newRig(t, &health{}).dialAs(t, "passthrough:///b", through(cl)...)
		start := time.Now()
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if err := check(context.Background(), a); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		// Another target has a pace of its own: served at once.
		if err := check(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 {
			t.Fatalf("a call to an idle target waited %v", got)
		}
		wg.Wait()
		at := st.times()
		slices.SortFunc(at, time.Time.Compare)
		if len(at) != 5 {
			t.Fatalf("%d calls served, want 5", len(at))
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 500*time.Millisecond {
				t.Fatalf("calls to one target %v apart at 2 per second, at %v", gap, offsets(start, at))
			}
		}
		if s := cl.Stats(); s.Paced != 4 {
			t.Fatalf("stats %+v, want 4 calls paced", s)
		}
	})
}

func TestClientPaceMissedFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &health{}
		cl := mustClient(t, WithPace(1, time.Minute))
		conn := newRig(t, h).dial(t, through(cl)...)
		if err := check(context.Background(), conn); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := check(ctx, conn)
		if status.Code(err) != codes.DeadlineExceeded || time.Since(start) != 0 {
			t.Fatalf("%v after %v, want DeadlineExceeded at once", err, time.Since(start))
		}
		// Past the max wait it is the same, without a deadline.
		err = check(context.Background(), conn)
		if status.Code(err) != codes.DeadlineExceeded || h.calls.Load() != 1 {
			t.Fatalf("%v, %d served: want DeadlineExceeded, the turn a minute off is past the max wait", err, h.calls.Load())
		}
		if s := cl.Stats(); s.PaceMissed != 2 {
			t.Fatalf("stats %+v, want 2 missed turns", s)
		}
	})
}

func TestClientPacedTargetsAreDroppedOnlyWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := mustClient(t, WithPace(1, time.Second))
		ctx := context.Background()
		for i := range DefaultMaxTargets {
			if err := cl.await(ctx, "target-"+strconv.Itoa(i), 0, nil); err != nil {
				t.Fatal(err)
			}
		}
		_ = cl.await(ctx, "one-too-many", 0, nil)
		if n := cl.Stats().Untracked; n != 1 {
			t.Fatalf("untracked %d with every pacer a turn in, want 1", n)
		}
		time.Sleep(time.Second) // a period later every pacer is idle
		_ = cl.await(ctx, "newcomer", 0, nil)
		if n := cl.Stats().Untracked; n != 1 || cl.targetOf("newcomer", 0, false) == nil {
			t.Fatalf("untracked %d: the newcomer found no room among idle pacers", n)
		}
	})
}

func TestWithPaceRejectsWhatAPacerRejects(t *testing.T) {
	for _, o := range []ClientOption{WithPace(0, time.Second), WithPace(1, 0), WithPace(2, time.Nanosecond)} {
		if _, err := NewClient(o); err == nil {
			t.Error("NewClient accepted a bad pace")
		}
	}
}
