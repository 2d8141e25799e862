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
	"github.com/sluicehq/sluice/store/storetest"
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
	storetest.RetryDoubling(t, faultTries, 100*time.Millisecond, func(_ int, timeout time.Duration) string {
		return fallbackWhilePaused(t, srv, timeout)
	})
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
	return storetest.FallbackPause{Fallback: f, Limit: id, Backend: "memcached", Share: 5,
		Timeout: timeout, Slack: faultSlack, Pause: srv.Pause, Resume: srv.Resume}.Try(t)
}
