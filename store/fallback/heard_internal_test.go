package fallback

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// deadMembers is a Membership whose remote is down.
type deadMembers struct{}

func (deadMembers) Beat(context.Context, time.Duration) (int64, error) {
	return 0, store.Unavailable(errDegraded)
}
func (deadMembers) Leave(context.Context) error { return nil }

// TestHeardNeverLowersNWhileDegraded drives the breaker through heard, the
// heartbeat goroutine's step, with the counts a remote restarted empty
// reports (the goroutine itself waits an hour between beats): while the
// breaker is open N stays at the last count heard before it opened, and
// the local share with it; the probe that closes the breaker may raise N
// but not lower it; the next healthy heartbeat sets it.
func TestHeardNeverLowersNWhileDegraded(t *testing.T) {
	remote := storetest.NewFaulty(store.NewMemory())
	remote.SetErr(store.Unavailable(errDegraded))
	f, err := New(remote, deadMembers{}, WithTripAfter(1), WithRecoverAfter(2), WithProbeInterval(time.Hour),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	remote.SetErr(nil)
	id, err := f.Register(context.Background(), store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: 30, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	remote.SetErr(store.Unavailable(errDegraded))
	admit := func(n int) int {
		admitted := 0
		for range n {
			req := store.Request{Now: int64(time.Hour)}
			req.Add(id, "k", 1)
			var res store.Result
			if err := f.Decide(context.Background(), &req, &res); err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				admitted++
			}
		}
		return admitted
	}
	want := func(step string, degraded bool, n int64) {
		t.Helper()
		if st := f.Stats(); st.Degraded != degraded || st.Instances != n {
			t.Fatalf("%s: degraded %v N %d, want %v %d", step, st.Degraded, st.Instances, degraded, n)
		}
	}
	want("the first heartbeat failed", true, 1)
	f.heard(3, nil)
	f.heard(3, nil)
	want("two good probes", false, 3)
	if got := admit(40); got != 10 {
		t.Fatalf("remote down again: %d admitted locally, want 10 (30 / 3)", got)
	}
	want("after the decisions", true, 3)
	f.heard(1, nil) // the remote back, empty: this instance beats first
	want("one good probe of an empty remote", true, 3)
	if got := admit(40); got != 0 {
		t.Fatalf("%d more admitted locally while the remote counted 1 instance, want 0 (the share of 3 is spent)", got)
	}
	f.heard(2, nil)
	want("the closing probe counting 2", false, 3)
	f.heard(2, nil)
	want("the next heartbeat", false, 2)
	f.heard(0, errDegraded)
	want("one failed heartbeat trips it", true, 2)
	f.heard(4, nil)
	f.heard(4, nil)
	want("a closing probe counting more", false, 4)
}
