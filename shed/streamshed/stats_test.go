package streamshed_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// TestStatsCountEveryEnd: a connection done, one over its message limit
// (whose close fails), one whose context ended and one at its lifetime
// are counted each by how it ended, and none is left open.
func TestStatsCountEveryEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGuard(t, nil, streamshed.WithMaxLifetime(time.Minute),
			streamshed.WithMessageLimit(1, ratelimit.Per(1, time.Hour)))
		ip := alice().IP
		open := func(ctx context.Context, user string) *streamshed.Conn {
			t.Helper()
			ip = ip.Next() // each from its own address: the rate rule stays out
			a := alice()
			a.User, a.IP = user, ip
			conn, _, err := g.Open(ctx, a)
			if err != nil || conn == nil {
				t.Fatal(err)
			}
			return conn
		}
		open(context.Background(), "done").Done()
		violator := open(context.Background(), "violator")
		violator.Bind(func(int, string) error { return errors.New("gone") })
		_ = violator.Message()
		if err := violator.Message(); !errors.Is(err, streamshed.ErrPolicyViolation) {
			t.Fatalf("second message: %v", err)
		}
		if s := g.Stats(); s.Opened != 2 || s.Open != 0 || s.Violations != 1 || s.CloseErrors != 1 {
			t.Fatalf("after a Done and a violation: %+v", s)
		}
		ctx, cancel := context.WithCancel(context.Background())
		open(ctx, "cancelled")
		lived := open(context.Background(), "lived")
		defer lived.Done()
		cancel()
		synctest.Wait()
		if s := g.Stats(); s.Opened != 4 || s.Open != 1 || s.ContextEnded != 1 || s.LifetimeEnded != 0 {
			t.Fatalf("after the context's end: %+v", s)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		want := streamshed.Stats{Opened: 4, Open: 0, Violations: 1, ContextEnded: 1, LifetimeEnded: 1, CloseErrors: 1}
		if s := g.Stats(); s != want {
			t.Fatalf("at the end: %+v, want %+v", s, want)
		}
	})
}
