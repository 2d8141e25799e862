package mysqlstore_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/mysqlstore"
)

// TestFallbackDecidesOnTheShareWhileTheServerIsPaused: two instances on a
// private MariaDB count each other in the heartbeat table; when the
// server is paused, an instance's decisions fail over to its local half of
// the limit, each within about the store's deadline, counted; when the
// server resumes, the breaker closes again and decisions are MariaDB's.
func TestFallbackDecidesOnTheShareWhileTheServerIsPaused(t *testing.T) {
	srv := startServer(t)
	db := openDB(t, srv.dsn())
	ctx := context.Background()
	quiet := fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var fbs [2]*fallback.Store
	var ids [2]store.LimitID
	for i := range fbs {
		s, err := mysqlstore.New(db, mysqlstore.WithPrefix("fb"), mysqlstore.WithTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		f, err := mysqlstore.NewFallback(s, fallback.WithTripAfter(1), fallback.WithRecoverAfter(1),
			fallback.WithProbeInterval(20*time.Millisecond), quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		fbs[i] = f
		if ids[i], err = f.Register(ctx, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 10, Window: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	f := fbs[0]
	decideOn := func() (bool, time.Duration) {
		t.Helper()
		req := store.Request{Now: time.Now().UnixNano()}
		req.Add(ids[0], "tenant", 1)
		var res store.Result
		start := time.Now()
		if err := f.Decide(ctx, &req, &res); err != nil {
			t.Fatalf("a fallback's Decide failed: %v", err)
		}
		return res.Allowed, time.Since(start)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waited 5s for %s: %+v", what, f.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("both instances counted", func() bool { return f.Stats().Instances == 2 })
	if ok, _ := decideOn(); !ok || f.Stats().Degraded {
		t.Fatalf("on a live server: admitted %v, %+v", ok, f.Stats())
	}

	srv.Pause()
	admitted := 0
	for range 20 {
		ok, took := decideOn()
		if took > 500*time.Millisecond {
			srv.Resume()
			t.Fatalf("a decision took %v on a paused server, want about the 100ms deadline at most", took)
		}
		if ok {
			admitted++
		}
	}
	st := f.Stats()
	srv.Resume()
	if !st.Degraded || st.Trips != 1 || st.FallbackDecisions != 20 {
		t.Fatalf("after 20 decisions on a paused server: %+v, want degraded, one trip, 20 local decisions", st)
	}
	if admitted != 5 {
		t.Fatalf("admitted %d locally, want 5 (the limit of 10 shared by 2 instances)", admitted)
	}

	waitFor("the breaker closed", func() bool { return !f.Stats().Degraded })
	if ok, _ := decideOn(); !ok {
		t.Fatal("after recovery: rejected on MariaDB, which counted 1 of 10")
	}
	if d := f.Stats(); d.Recoveries != 1 {
		t.Fatalf("after recovery: %+v", d)
	}
}
