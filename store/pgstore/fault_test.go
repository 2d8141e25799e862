package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/pgstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// faultSlack is the generous margin over the deadline a call may take on a
// loaded CI machine under -race; it bounds a hung call, not performance.
const faultSlack = 2 * time.Second

// TestClosedPortIsUnavailable: a store whose database does not answer
// fails every call with store.ErrUnavailable, within its deadline.
func TestClosedPortIsUnavailable(t *testing.T) {
	p := newPool(t, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	const timeout = 200 * time.Millisecond
	s, err := pgstore.New(p, pgstore.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour})
	for name, call := range map[string]func() error{
		"Decide": func() error {
			var req store.Request
			req.Add(id, "k", 1)
			return s.Decide(ctx, &req, new(store.Result))
		},
		"Usage": func() error { _, err := s.Usage(ctx, id, "k"); return err },
		"Reset": func() error { return s.Reset(ctx, id, "k") },
		"Refund": func() error {
			var req store.Request
			req.Add(id, "k", 1)
			res := store.Result{Allowed: true, N: 1}
			return s.Refund(ctx, &req, &res)
		},
	} {
		start := time.Now()
		err := call()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s: %v, want store.ErrUnavailable", name, err)
		}
		if took := time.Since(start); took > timeout+faultSlack {
			t.Fatalf("%s took %v, past its deadline %v", name, took, timeout)
		}
	}
}

// TestEndedContextIsTheCallersError: a caller whose context ended gets
// ctx.Err(), not store.ErrUnavailable (the store did not fail).
func TestEndedContextIsTheCallersError(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var req store.Request
	req.Add(id, "k", 1)
	if err := s.Decide(ctx, &req, new(store.Result)); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Decide with an ended context: %v, want context.Canceled", err)
	}
}

// blocked is a decision that waits on a row lock.
type blocked struct {
	done    <-chan decided // the decision's outcome, once it returns
	waited  bool           // the decision was seen waiting on the lock
	release func()         // rolls the lock's transaction back
}

// decided is how a blocked decision ended and how long it took.
type decided struct {
	err  error
	took time.Duration
}

// blockedDecision starts a decision of cost 1 on key "k" of limit id that
// waits on the row lock a transaction of admin holds, and returns once the
// decision waits on it or has returned (on a machine slow enough, before
// it was seen waiting: then waited is false). The store's pool must have
// one connection, whose pid is pid.
func blockedDecision(t *testing.T, admin *pgxpool.Pool, s *pgstore.Store, id store.LimitID, pid uint32) blocked {
	t.Helper()
	ctx := context.Background()
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM "`+s.SchemaName()+`".state WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan decided, 1)
	go func() {
		var req store.Request
		req.Add(id, "k", 1)
		start := time.Now()
		err := s.Decide(ctx, &req, new(store.Result))
		done <- decided{err, time.Since(start)}
	}()
	b := blocked{done: done, release: func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}}
	waitFor(t, func() bool {
		if len(done) > 0 {
			return true // it returned before it was seen waiting
		}
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&b.waited)
		return err == nil && b.waited
	})
	return b
}

// waitFor polls cond until it holds, for at most 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// onePool returns a pool of one connection to the shared database and that
// connection's backend pid.
func onePool(t *testing.T) (*pgxpool.Pool, uint32) {
	t.Helper()
	sharedPool(t) // skips when there is none
	cfg, err := pgxpool.ParseConfig(sharedURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	var pid uint32
	if err := p.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return p, pid
}

// TestKilledSessionIsUnavailableAndChargesNothing: when the database ends
// the session of a decision in flight (pg_terminate_backend, on this
// test's own session only), Decide fails with store.ErrUnavailable at
// once, the decision was rolled back (nothing charged, and it is not
// retried), and the next call decides on a new session.
func TestKilledSessionIsUnavailableAndChargesNothing(t *testing.T) {
	admin := sharedPool(t)
	p, pid := onePool(t)
	s := newStoreOn(t, p, admin, pgstore.WithTimeout(30*time.Second))
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: 24 * time.Hour})
	storetest.Decide(t, s, id, "k", 1)
	b := blockedDecision(t, admin, s, id, pid)
	if !b.waited {
		t.Fatalf("the decision returned before it waited on the lock: %v", (<-b.done).err)
	}
	var killed bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, killed, err)
	}
	if d := <-b.done; !errors.Is(d.err, store.ErrUnavailable) {
		t.Fatalf("Decide on a killed session: %v, want store.ErrUnavailable", d.err)
	}
	b.release()
	u, err := s.Usage(ctx, id, "k")
	if err != nil {
		t.Fatalf("Usage on a new session: %v", err)
	}
	if u.Used != 1 {
		t.Fatalf("Used %d after a killed decision, want 1 (it must be rolled back, not retried)", u.Used)
	}
}

// TestDeadlineIsUnavailableAndRolledBack: a decision that waits on a lock
// past the store's deadline fails with store.ErrUnavailable within it (the
// caller's context still live), and the database gives up on it too (pgx
// sends a cancel request when it closes the connection, and the function's
// lock_timeout is the deadline should that request be lost): it is rolled
// back rather than committed after the caller was told it failed, and it is
// never sent again.
//
// The case needs the decision seen waiting on the lock before its deadline
// and a loaded machine may not manage it in 300ms: a try that could not
// show the case is run again with twice the deadline, a few times.
func TestDeadlineIsUnavailableAndRolledBack(t *testing.T) {
	admin := sharedPool(t)
	const tries = 5
	for try, timeout := 1, 300*time.Millisecond; ; try, timeout = try+1, 2*timeout {
		why := deadlineRollsBack(t, admin, timeout)
		if why == "" {
			return
		}
		if try == tries {
			t.Fatalf("%d tries, the last with a deadline of %v: %s", tries, timeout, why)
		}
		t.Logf("with a deadline of %v: %s; trying again with twice that", timeout, why)
	}
}

// deadlineRollsBack is one try of TestDeadlineIsUnavailableAndRolledBack
// with the given deadline, on a pool and a schema of its own. It fails t
// where the store is wrong, and returns why when the machine was too slow
// for the try to show anything (the empty string when it showed the case).
// The limit is registered and read through a second Store of the schema
// with a deadline the machine always meets, so that only the blocked
// decision has the short one.
func deadlineRollsBack(t *testing.T, admin *pgxpool.Pool, timeout time.Duration) string {
	t.Helper()
	p, pid := onePool(t)
	schema := testSchema(t, admin)
	patient, err := pgstore.New(p, pgstore.WithSchema(schema), pgstore.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(p, pgstore.WithSchema(schema), pgstore.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := patient.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: 24 * time.Hour}
	patientID, id := storetest.MustRegister(t, patient, spec), storetest.MustRegister(t, s, spec)
	storetest.Decide(t, patient, patientID, "k", 1)
	b := blockedDecision(t, admin, s, id, pid)
	d := <-b.done
	if !errors.Is(d.err, store.ErrUnavailable) || !errors.Is(d.err, context.DeadlineExceeded) {
		t.Fatalf("Decide past the deadline: %v, want store.ErrUnavailable wrapping the deadline", d.err)
	}
	// The lock is still held: the statement ends only by being cancelled
	// (its session then finds the connection closed) or by its lock_timeout,
	// the same deadline, when the database notices it first (the session
	// stays, idle).
	waitFor(t, func() bool {
		var n int
		return admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", pid).Scan(&n) == nil && n == 0
	})
	b.release()
	u, err := patient.Usage(ctx, patientID, "k")
	if err != nil {
		t.Fatal(err)
	}
	if u.Used != 1 {
		t.Fatalf("Used %d after a decision past its deadline, want 1 (rolled back, not retried)", u.Used)
	}
	switch {
	case !b.waited:
		return "the decision returned before it was seen waiting on the lock"
	case d.took > timeout+faultSlack:
		return fmt.Sprintf("the decision took %v, past its deadline and %v of slack", d.took, faultSlack)
	}
	return ""
}
