package memcachestore_test

import (
	"context"
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
func TestFallbackDecidesOnTheShareWhileTheServerIsPaused(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv.client())
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
	srv.Pause()
	admitted := 0
	for range 20 {
		ok, took := decideOn()
		if took > 500*time.Millisecond {
			srv.Resume()
			t.Fatalf("a decision took %v on a paused server", took)
		}
		if ok {
			admitted++
		}
	}
	st := f.Stats()
	srv.Resume()
	if !st.Degraded || st.FallbackDecisions != 20 || admitted != 5 {
		t.Fatalf("paused: admitted %d locally (want 5, half of 10), %+v", admitted, st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.Stats().Degraded {
		if time.Now().After(deadline) {
			t.Fatalf("the breaker did not close after the server resumed: %+v", f.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ok, _ := decideOn(); !ok {
		t.Fatal("after recovery: rejected on memcached, which counted 1 of 10")
	}
}
