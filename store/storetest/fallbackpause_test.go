package storetest_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/storetest"
)

// paused is a server of two instances that a test pauses: its Beat fails
// while paused, as Faulty's calls do.
type paused struct {
	remote *storetest.Faulty
	down   atomic.Bool
}

func (p *paused) pause() {
	p.down.Store(true)
	p.remote.SetErr(store.Unavailable(context.DeadlineExceeded))
}

func (p *paused) resume() { p.down.Store(false); p.remote.SetErr(nil) }

func (p *paused) Beat(context.Context, time.Duration) (int64, error) {
	if p.down.Load() {
		return 0, store.Unavailable(context.DeadlineExceeded)
	}
	return 2, nil
}

func (p *paused) Leave(context.Context) error { return nil }

// TestFallbackPauseShowsAFallbackThatKeepsItsShare: a Fallback of two
// instances around a store that a pause makes fail decides on half the
// limit while paused and on the store again once resumed: the try shows
// the case, in virtual time.
func TestFallbackPauseShowsAFallbackThatKeepsItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &paused{remote: storetest.NewFaulty(store.NewMemory())}
		f, err := fallback.New(srv.remote, srv, fallback.WithTripAfter(1), fallback.WithRecoverAfter(1),
			fallback.WithProbeInterval(20*time.Millisecond), fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		id := storetest.MustRegister(t, f, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 10, Window: 24 * time.Hour})
		why := storetest.FallbackPause{Fallback: f, Limit: id, Backend: "Faulty", Share: 5,
			Timeout: 100 * time.Millisecond, Slack: 0, Pause: srv.pause, Resume: srv.resume}.Try(t)
		if why != "" {
			t.Fatalf("the try did not show the case: %s", why)
		}
	})
}
