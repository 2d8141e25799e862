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
	"github.com/sluicehq/sluice/store/storetest"
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
	storetest.RetryDoubling(t, faultTries, 100*time.Millisecond, func(n int, timeout time.Duration) string {
		return fallbackWhilePaused(t, srv, db, "fb"+strconv.Itoa(n), timeout)
	})
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st := f.Stats(); st.Instances == 2 && !st.Degraded {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("waited 5s for both instances counted on the live server: %+v", f.Stats())
		}
	}
	return storetest.FallbackPause{Fallback: f, Limit: ids[0], Backend: "MariaDB", Share: 5,
		Timeout: timeout, Slack: faultSlack, Pause: srv.Pause, Resume: srv.Resume}.Try(t)
}
