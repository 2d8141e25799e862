package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysqlstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// faultSlack is the margin over the deadline a call on a failed server may
// take on a loaded machine under -race; it bounds a hung call, not
// performance.
const faultSlack = 400 * time.Millisecond

// faultTries is how many times a fault test runs its scenario, the
// deadline doubled each time, before a try that could not show the case
// (the machine too slow for the deadline) fails it.
const faultTries = 5

// TestPausedAndStoppedServerIsUnavailableWithinTheDeadline: on a private
// MariaDB, a paused server (SIGSTOP: connections open, no answer) fails a
// decision with ErrUnavailable within about the store's deadline, the
// store recovers when it resumes, and a killed server fails at once.
//
// A loaded machine may miss a 100ms deadline on the live server too, or
// take longer than the slack to give up: such a try is run again with
// twice the deadline, under a prefix of its own.
func TestPausedAndStoppedServerIsUnavailableWithinTheDeadline(t *testing.T) {
	srv := startServer(t)
	db := openDB(t, srv.dsn())
	var s limitedStore
	timeout := storetest.RetryDoubling(t, faultTries, 100*time.Millisecond, func(n int, timeout time.Duration) string {
		var why string
		s, why = pausedIsUnavailable(t, srv, db, "fault"+strconv.Itoa(n), timeout)
		return why
	})
	// The last: a killed server fails at once, with the deadline of the
	// try that showed the rest (the least of three calls).
	srv.Kill()
	var req store.Request
	req.Add(s.id, "k", 1)
	least := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		err := s.Decide(context.Background(), &req, new(store.Result))
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("killed server: %v, want ErrUnavailable", err)
		}
		least = min(least, time.Since(start))
	}
	if least > timeout+faultSlack {
		t.Fatalf("killed server: ErrUnavailable after %v at the least, want at once", least)
	}
}

// limitedStore is a Store and the id of its limit.
type limitedStore struct {
	*mysqlstore.Store
	id store.LimitID
}

// pausedIsUnavailable is one try of
// TestPausedAndStoppedServerIsUnavailableWithinTheDeadline under prefix,
// leaving srv running. It fails t where the store is wrong and returns why
// when the machine was too slow for the try to show the case (the empty
// string when it showed it). The limit is made and first charged through a
// second Store of the prefix, with a deadline the machine always meets.
func pausedIsUnavailable(t *testing.T, srv *server, db *sql.DB, prefix string, timeout time.Duration) (limitedStore, string) {
	t.Helper()
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 100, Window: time.Hour}
	patient, err := mysqlstore.New(db, mysqlstore.WithPrefix(prefix), mysqlstore.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := patient.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	storetest.Decide(t, patient, storetest.MustRegister(t, patient, spec), "k", 1)
	st, err := mysqlstore.New(db, mysqlstore.WithPrefix(prefix), mysqlstore.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	s := limitedStore{st, storetest.MustRegister(t, st, spec)}
	var req store.Request
	req.Add(s.id, "k", 1)
	attempt := func() (time.Duration, error) {
		start := time.Now()
		err := s.Decide(context.Background(), &req, new(store.Result))
		return time.Since(start), err
	}
	if _, err := attempt(); err != nil {
		return s, fmt.Sprintf("a decision on the live server failed: %v", err)
	}

	srv.Pause()
	for range 3 {
		took, err := attempt()
		if !errors.Is(err, store.ErrUnavailable) {
			srv.Resume()
			t.Fatalf("paused server: %v after %v, want ErrUnavailable", err, took)
		}
		if took > timeout+faultSlack {
			srv.Resume()
			return s, fmt.Sprintf("a decision on the paused server took %v, past the deadline and %v of slack", took, faultSlack)
		}
	}
	srv.Resume()
	for range 50 { // bounded: the pool drops the connections it gave up on
		if _, err := attempt(); err == nil {
			return s, ""
		}
	}
	return s, "the store did not recover in 50 decisions once the server resumed"
}

// TestKilledSessionIsUnavailableAndChargesNothing: a decision whose
// session is killed (KILL of the test's own connection, on the shared
// server) while it waits for a row lock fails with ErrUnavailable, and once
// the lock goes nothing of it was charged.
func TestKilledSessionIsUnavailableAndChargesNothing(t *testing.T) {
	db := sharedDB(t)
	s := newStore(t, db)
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour})
	storetest.Decide(t, s, id, "k", 1)
	tx, holder := holdRow(t, db, s, "k")
	done := make(chan error, 1)
	go func() {
		var req store.Request
		req.Add(id, "k", 3)
		done <- s.Decide(ctx, &req, new(store.Result))
	}()
	// The decision's own session, found by the statement it waits in.
	var session int64
	for deadline := time.Now().Add(4 * time.Second); session == 0; {
		ids, err := decisionSessions(db, s, holder)
		switch {
		case err != nil:
			t.Fatal(err)
		case len(ids) > 0:
			session = ids[0]
		case time.Now().After(deadline):
			t.Fatal("the waiting decision's session was not found")
		default:
			time.Sleep(5 * time.Millisecond) // a real server's statement: no virtual time
		}
	}
	if _, err := db.Exec("KILL " + strconv.FormatInt(session, 10)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a decision whose session was killed: %v, want ErrUnavailable", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if d := storetest.Decide(t, s, id, "k", 0).Decision(); d.Remaining != 4 {
		t.Fatalf("after the kill: Remaining %d, want 4 (nothing charged)", d.Remaining)
	}
}
