package pgstore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/pgstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// fbProbe is the heartbeat of the fault tests' Fallbacks.
const fbProbe = 100 * time.Millisecond

// decideAt decides one hit of cost 1 at now through s.
func decideAt(t *testing.T, s store.Store, id store.LimitID, key string, now int64) bool {
	t.Helper()
	req := store.Request{Now: now}
	req.Add(id, key, 1)
	var res store.Result
	if err := s.Decide(context.Background(), &req, &res); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res.Allowed
}

// TestFallbackWhileTheDatabaseIsDown: two instances share a daily quota of
// 40 on a private PostgreSQL and count each other in its instances table.
// When the server stops, the next decision is made locally within the
// deadline, and over the outage each instance admits its share, 20, so the
// two together at most the quota; when it starts again both decide on it
// within the recovery hysteresis, and what was counted before the outage
// survived the restart.
func TestFallbackWhileTheDatabaseIsDown(t *testing.T) {
	srv := startServer(t)
	const timeout = 200 * time.Millisecond
	ctx := context.Background()
	var logs storetest.LogBuffer
	var fs [2]*fallback.Store
	var ids [2]store.LimitID
	var stores [2]*pgstore.Store
	for i := range fs {
		s, err := pgstore.New(newPool(t, srv.url()), pgstore.WithTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		f, err := pgstore.NewFallback(s, fallback.WithProbeInterval(fbProbe), fallback.WithTripAfter(1),
			fallback.WithRecoverAfter(2), fallback.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		fs[i], stores[i] = f, s
		ids[i] = storetest.MustRegister(t, f, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 40, Window: 24 * time.Hour})
	}
	waitFor(t, func() bool { return fs[0].Stats().Instances == 2 && fs[1].Stats().Instances == 2 })
	now := time.Now().UnixNano()
	for range 5 {
		if !decideAt(t, fs[0], ids[0], "tenant", now) {
			t.Fatal("rejected under the quota")
		}
	}

	srv.stop()
	start := time.Now()
	if !decideAt(t, fs[0], ids[0], "tenant", now) {
		t.Fatal("the first decision after the database stopped was rejected, want the local share")
	}
	if took := time.Since(start); took > timeout+faultSlack {
		t.Fatalf("the first decision after the database stopped took %v, past the deadline %v", took, timeout)
	}
	if st := fs[0].Stats(); !st.Degraded || st.FallbackDecisions != 1 || st.Instances != 2 {
		t.Fatalf("after the first failed call: %+v, want degraded, one local decision, N 2", st)
	}
	total := 1
	for i, f := range fs {
		got := 0
		for range 30 {
			if decideAt(t, f, ids[i], "tenant", now) {
				got++
			}
		}
		if want := 20 - i0(i == 0); got != want {
			t.Errorf("instance %d admitted %d locally, want %d (its share: 40 / 2)", i, got, want)
		}
		total += got
	}
	if total > 40 {
		t.Errorf("%d admitted over the outage, more than the quota of 40", total)
	}

	srv.start()
	waitFor(t, func() bool { return !fs[0].Stats().Degraded && !fs[1].Stats().Degraded })
	u, err := stores[0].Usage(ctx, ids[0], "tenant")
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 5 {
		t.Errorf("after the restart the database counts %d, want the 5 counted before the outage", u.Used)
	}
	before := fs[1].Stats().FallbackDecisions
	if !decideAt(t, fs[1], ids[1], "tenant", now) || fs[1].Stats().FallbackDecisions != before {
		t.Error("after the recovery the decision was not made on the database")
	}
	// The line of the recovery may be held back for a second after the
	// line of the outage (one line a second at most).
	waitFor(t, func() bool { return strings.Contains(logs.String(), "answers again, deciding on PostgreSQL") })
	if l := logs.String(); !strings.Contains(l, "PostgreSQL unavailable, deciding on local limits") {
		t.Errorf("the outage is not logged:\n%s", l)
	}
}

// i0 is 1 when b holds: the first instance has made one local decision
// already.
func i0(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFallbackLostReplyIsChargedOnce: a decision whose session the database
// ends while it waits (pg_terminate_backend of this test's own session)
// loses its reply; the Fallback decides it locally instead, and the
// database did not charge it too: counted once in all, never twice.
func TestFallbackLostReplyIsChargedOnce(t *testing.T) {
	admin := sharedPool(t)
	p, pid := onePool(t)
	s := newStoreOn(t, p, admin, pgstore.WithTimeout(30*time.Second))
	ctx := context.Background()
	f, err := pgstore.NewFallback(s, fallback.WithInstances(1), fallback.WithProbeInterval(time.Hour),
		fallback.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id := storetest.MustRegister(t, f, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: 24 * time.Hour})
	now := time.Now().UnixNano()
	decideAt(t, f, id, "k", now)

	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM "`+s.SchemaName()+`".state WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() {
		req := store.Request{Now: now}
		req.Add(id, "k", 1)
		var res store.Result
		err := f.Decide(ctx, &req, &res)
		done <- err == nil && res.Allowed
	}()
	waitFor(t, func() bool {
		var waiting bool
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&waiting)
		return err == nil && waiting
	})
	var killed bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, killed, err)
	}
	if !<-done {
		t.Fatal("the decision whose reply was lost was not admitted locally")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.FallbackDecisions != 1 || st.RemoteErrors != 1 || st.Degraded {
		t.Errorf("stats %+v, want one local decision, one remote error, the breaker closed", st)
	}
	u, err := s.Usage(ctx, id, "k")
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 1 {
		t.Errorf("the database counts %d, want 1: the lost decision must be rolled back there, not charged twice", u.Used)
	}
	if !decideAt(t, f, id, "k", now) || f.Stats().FallbackDecisions != 1 {
		t.Error("the next decision was not made on the database, on a new session")
	}
}

// TestFallbackConformance runs the harness on a Fallback while the
// database answers: it is the database's store.
func TestFallbackConformance(t *testing.T) {
	p := sharedPool(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		f, err := pgstore.NewFallback(newStore(t, p), fallback.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}, storetest.WithServerTime(conformanceWait), unsupported)
}

func TestNewFallbackValidates(t *testing.T) {
	if _, err := pgstore.NewFallback(nil); err == nil {
		t.Error("NewFallback(nil) succeeded")
	}
	p := newPool(t, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1")
	s, err := pgstore.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.NewFallback(s, fallback.WithTripAfter(0)); err == nil || !strings.HasPrefix(err.Error(), "fallback: ") {
		t.Errorf("a bad option: %v, want an error of package fallback", err)
	}
}

// TestInstancesTableCountsStoresOnce: the Fallbacks around one Store are
// one row of the instances table, another Store another; the row goes when
// the last of its Fallbacks Closes, and the others count one fewer.
func TestInstancesTableCountsStoresOnce(t *testing.T) {
	p := sharedPool(t)
	a := newStore(t, p)
	b, err := pgstore.New(p, pgstore.WithSchema(a.SchemaName()))
	if err != nil {
		t.Fatal(err)
	}
	open := func(s *pgstore.Store) *fallback.Store {
		f, err := pgstore.NewFallback(s, fallback.WithProbeInterval(fbProbe), fallback.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	a1, a2, b1 := open(a), open(a), open(b)
	waitFor(t, func() bool { return b1.Stats().Instances == 2 })
	rows := func() int {
		var n int
		if err := p.QueryRow(context.Background(), `SELECT count(*) FROM "`+a.SchemaName()+`".instances`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	_ = a1.Close()
	if n := rows(); n != 2 {
		t.Errorf("%d rows after one of a's two Fallbacks closed, want 2", n)
	}
	_ = a2.Close()
	if n := rows(); n != 1 {
		t.Errorf("%d rows after both of a's Fallbacks closed, want 1", n)
	}
	waitFor(t, func() bool { return b1.Stats().Instances == 1 })
}
