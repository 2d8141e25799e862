package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"strconv"
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
//
// A loaded machine may miss a 100ms deadline on the live server too (the
// breaker then trips before the pause) or take longer than the slack to
// give up: such a try is run again with twice the deadline, under a prefix
// of its own.
func TestFallbackDecidesOnTheShareWhileTheServerIsPaused(t *testing.T) {
	srv := startServer(t)
	db := openDB(t, srv.dsn())
	timeout := 100 * time.Millisecond
	for try := 1; ; try, timeout = try+1, 2*timeout {
		why := fallbackWhilePaused(t, srv, db, "fb"+strconv.Itoa(try), timeout)
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
// TestFallbackDecidesOnTheShareWhileTheServerIsPaused under prefix, with
// the given deadline, leaving srv running. It fails t where the fallback
// is wrong and returns why when the machine was too slow for the try to
// show the case (the empty string when it showed it).
func fallbackWhilePaused(t *testing.T, srv *server, db *sql.DB, prefix string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	quiet := fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var fbs [2]*fallback.Store
	var ids [2]store.LimitID
	for i := range fbs {
		s, err := mysqlstore.New(db, mysqlstore.WithPrefix(prefix), mysqlstore.WithTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			return fmt.Sprintf("Migrate on the live server: %v", err)
		}
		f, err := mysqlstore.NewFallback(s, fallback.WithTripAfter(1), fallback.WithRecoverAfter(1),
			fallback.WithProbeInterval(20*time.Millisecond), quiet)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }() // this try's instances leave before the next's
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
	waitFor := func(within time.Duration, cond func() bool) bool {
		for deadline := time.Now().Add(within); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				return false
			}
		}
		return true
	}
	if !waitFor(5*time.Second, func() bool { st := f.Stats(); return st.Instances == 2 && !st.Degraded }) {
		return fmt.Sprintf("waited 5s for both instances counted on the live server: %+v", f.Stats())
	}
	if ok, _ := decideOn(); !ok || f.Stats().Degraded {
		return fmt.Sprintf("on the live server: admitted %v, %+v", ok, f.Stats())
	}

	before := f.Stats()
	if before.Degraded {
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
	// A trip and a recovery of the live server's just before the pause (a
	// heartbeat that missed the deadline) make one more.
	trips, local := st.Trips-before.Trips, st.FallbackDecisions-before.FallbackDecisions
	if !st.Degraded || trips < 1 || local != 20 {
		t.Fatalf("after 20 decisions on a paused server: %+v, was %+v: want degraded, a trip, 20 local decisions", st, before)
	}
	if trips > 1 {
		return fmt.Sprintf("%d trips around the pause, the live server's deadline missed: %+v", trips, st)
	}
	if admitted != 5 {
		t.Fatalf("admitted %d locally, want 5 (the limit of 10 shared by 2 instances)", admitted)
	}

	if !waitFor(10*time.Second, func() bool { return !f.Stats().Degraded }) {
		return fmt.Sprintf("waited 10s for the breaker to close once the server resumed: %+v", f.Stats())
	}
	ok, _ := decideOn()
	if after := f.Stats(); after.Degraded || after.FallbackDecisions != st.FallbackDecisions {
		return fmt.Sprintf("after recovery the breaker tripped again, the live server's deadline missed: %+v", after)
	}
	if !ok {
		t.Fatal("after recovery: rejected on MariaDB, which counted 1 of 10")
	}
	if d := f.Stats(); d.Recoveries-before.Recoveries != 1 {
		t.Fatalf("after recovery: %+v, was %+v", d, before)
	}
	return ""
}
