package memcachestore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/memcachestore"
)

// TestFallbackDecidesOnTheShareWhileTheServerIsPaused: with a fixed N of
// 2 (memcached cannot count instances), a paused memcached sends an
// instance's decisions to its local half of the limit, each within about
// the client's deadline, and a resumed one takes them back.
//
// A loaded machine may miss the 100ms deadline on the live server too (the
// breaker then trips before the pause or after the recovery) or take
// longer than the slack to give up: such a try is run again with twice
// the deadline.
func TestFallbackDecidesOnTheShareWhileTheServerIsPaused(t *testing.T) {
	srv := startServer(t)
	timeout := 100 * time.Millisecond
	for try := 1; ; try, timeout = try+1, 2*timeout {
		why := fallbackWhilePaused(t, srv, timeout)
		if why == "" {
			return
		}
		if try == faultTries {
			t.Fatalf("%d tries, the last with a deadline of %v: %s", faultTries, timeout, why)
		}
		t.Logf("with a deadline of %v: %s; trying again with twice that", timeout, why)
	}
}

// fallbackWhilePaused is one try of
// TestFallbackDecidesOnTheShareWhileTheServerIsPaused with the given
// deadline, under a prefix of its own, leaving srv running. It fails t
// where the fallback is wrong and returns why when the machine was too
// slow for the try to show the case (the empty string when it showed it).
func fallbackWhilePaused(t *testing.T, srv *server, timeout time.Duration) string {
	t.Helper()
	s := newStore(t, srv.clientWithin(timeout))
	f, err := memcachestore.NewFallback(s, fallback.WithInstances(2), fallback.WithTripAfter(1), fallback.WithRecoverAfter(1),
		fallback.WithProbeInterval(20*time.Millisecond), fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	id, err := f.Register(ctx, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 10, Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	decideOn := func() (bool, time.Duration) {
		t.Helper()
		req := store.Request{Now: time.Now().UnixNano()}
		req.Add(id, "tenant", 1)
		var res store.Result
		start := time.Now()
		if err := f.Decide(ctx, &req, &res); err != nil {
			t.Fatalf("a fallback's Decide failed: %v", err)
		}
		return res.Allowed, time.Since(start)
	}
	if ok, _ := decideOn(); !ok {
		t.Fatal("rejected on a live server")
	}
	before := f.Stats()
	if before.Degraded || before.FallbackDecisions != 0 {
		return fmt.Sprintf("the breaker tripped on the live server: %+v", before)
	}
	srv.Pause()
	admitted := 0
	for range 20 {
		ok, took := decideOn()
		if took > timeout+faultSlack {
			srv.Resume()
			return fmt.Sprintf("a decision took %v on a paused server, past the deadline and %v of slack", took, faultSlack)
		}
		if ok {
			admitted++
		}
	}
	st := f.Stats()
	srv.Resume()
	if st.Trips-before.Trips > 1 {
		return fmt.Sprintf("%d trips around the pause, the live server's deadline missed: %+v", st.Trips-before.Trips, st)
	}
	if !st.Degraded || st.FallbackDecisions != 20 || admitted != 5 {
		t.Fatalf("paused: admitted %d locally (want 5, half of 10), %+v", admitted, st)
	}
	for deadline := time.Now().Add(5 * time.Second); f.Stats().Degraded; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Sprintf("the breaker did not close within 5s of the server resuming: %+v", f.Stats())
		}
	}
	ok, _ := decideOn()
	if after := f.Stats(); after.Degraded || after.FallbackDecisions != st.FallbackDecisions {
		return fmt.Sprintf("after recovery the breaker tripped again, the live server's deadline missed: %+v", after)
	}
	if !ok {
		t.Fatal("after recovery: rejected on memcached, which counted 1 of 10")
	}
	return ""
}
