package mysqlstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysqlstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestPausedAndStoppedServerIsUnavailableWithinTheDeadline: on a private
// MariaDB, a paused server (SIGSTOP: connections open, no answer) fails a
// decision with ErrUnavailable within about the store's deadline, the
// store recovers when it resumes, and a killed server fails at once.
func TestPausedAndStoppedServerIsUnavailableWithinTheDeadline(t *testing.T) {
	srv := startServer(t)
	db := openDB(t, srv.dsn())
	s, err := mysqlstore.New(db, mysqlstore.WithPrefix("fault"), mysqlstore.WithTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 100, Window: time.Hour})
	storetest.Decide(t, s, id, "k", 1)
	var req store.Request
	req.Add(id, "k", 1)
	attempt := func() (time.Duration, error) {
		start := time.Now()
		err := s.Decide(context.Background(), &req, new(store.Result))
		return time.Since(start), err
	}

	srv.Pause()
	for range 3 {
		if took, err := attempt(); !errors.Is(err, store.ErrUnavailable) || took > 500*time.Millisecond {
			srv.Resume()
			t.Fatalf("paused server: %v after %v, want ErrUnavailable within about 100ms", err, took)
		}
	}
	srv.Resume()
	var ok bool
	for range 50 { // bounded: the pool drops the connections it gave up on
		if _, err := attempt(); err == nil {
			ok = true
			break
		}
	}
	if !ok {
		t.Fatal("the store did not recover once the server resumed")
	}

	srv.Kill()
	if took, err := attempt(); !errors.Is(err, store.ErrUnavailable) || took > 500*time.Millisecond {
		t.Fatalf("killed server: %v after %v, want ErrUnavailable at once", err, took)
	}
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
