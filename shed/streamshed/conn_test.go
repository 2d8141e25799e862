package streamshed_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// TestDefaultMessageLimitIsFiftyAtTenPerSecond: the defaults the issue
// names.
func TestDefaultMessageLimitIsFiftyAtTenPerSecond(t *testing.T) {
	if streamshed.DefaultMessageBurst != 50 || streamshed.DefaultMessagesPerSecond != 10 {
		t.Fatalf("defaults %d at %d/s, want 50 at 10/s", streamshed.DefaultMessageBurst, streamshed.DefaultMessagesPerSecond)
	}
	if streamshed.PolicyViolation != 1008 || streamshed.GoingAway != 1001 {
		t.Fatalf("close codes %d, %d", streamshed.PolicyViolation, streamshed.GoingAway)
	}
}

// TestOpenHoldsTheUsersConnectionUntilDone: a user's third open connection
// is refused while two are open, and admitted once one of them is done.
func TestOpenHoldsTheUsersConnectionUntilDone(t *testing.T) {
	g, c := newGuard(t, nil)
	ctx := context.Background()
	a := alice()
	first, _, err := g.Open(ctx, a)
	if err != nil || first == nil {
		t.Fatalf("first: %v", err)
	}
	a.IP = a.IP.Next() // another address: the rate rule of the first stays out of it
	second, _, err := g.Open(ctx, a)
	if err != nil || second == nil {
		t.Fatalf("second: %v", err)
	}
	defer second.Done()
	a.IP = a.IP.Next()
	third, d, err := g.Open(ctx, a)
	if err != nil || third != nil || d.Allowed || d.Rule != "open-user" {
		t.Fatalf("third while two are open: conn %v, %+v, %v", third, d, err)
	}
	if n := inflight(c); n != 2 {
		t.Fatalf("inflight %d, want 2", n)
	}
	first.Done()
	first.Done() // idempotent
	if s := c.Stats(); s.Inflight != 1 || s.DoubleDone != 0 {
		t.Fatalf("after Done: inflight %d, double done %d", s.Inflight, s.DoubleDone)
	}
	third, _, err = g.Open(ctx, a)
	if err != nil || third == nil {
		t.Fatalf("third after one is done: %v", err)
	}
	third.Done()
}

// TestOpenLimitsHowOftenAnAddressConnects: the per-IP rate rule refuses the
// fourth connection of a minute, even when the earlier ones are closed,
// and says when to come back.
func TestOpenLimitsHowOftenAnAddressConnects(t *testing.T) {
	clk := newFrozen()
	g, _ := newGuard(t, clk.Now)
	for i := range 3 {
		conn, _, err := g.Open(context.Background(), alice())
		if err != nil || conn == nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conn.Done()
	}
	conn, d, err := g.Open(context.Background(), alice())
	if err != nil || conn != nil || d.Kind != shed.OverLimit || d.Rule != "connect-ip" || d.RetryAfter != 20*time.Second {
		t.Fatalf("fourth: conn %v, %+v, %v", conn, d, err)
	}
	clk.Add(20 * time.Second)
	if conn, _, err = g.Open(context.Background(), alice()); err != nil || conn == nil {
		t.Fatalf("after Retry-After: %v", err)
	}
	conn.Done()
}

// TestMessageOverTheBurstClosesWithPolicyViolation: 50 messages at one
// instant pass, the 51st closes the connection once with 1008 and a reason
// naming the limit, gives the Token back, and nothing after it passes.
func TestMessageOverTheBurstClosesWithPolicyViolation(t *testing.T) {
	clk := newFrozen()
	g, c := newGuard(t, clk.Now)
	conn, _, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatal(err)
	}
	var cl closes
	conn.Bind(cl.Close)
	for i := range streamshed.DefaultMessageBurst {
		if err := conn.Message(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := conn.Message(); !errors.Is(err, streamshed.ErrPolicyViolation) {
		t.Fatalf("message 51: %v, want ErrPolicyViolation", err)
	}
	calls := cl.Calls()
	if len(calls) != 1 || calls[0].code != streamshed.PolicyViolation || !strings.Contains(calls[0].reason, "50 at once, 10/1s") || len(calls[0].reason) > 123 {
		t.Fatalf("close calls %+v", calls)
	}
	if n := inflight(c); n != 0 {
		t.Fatalf("inflight %d after the violation", n)
	}
	clk.Add(time.Hour) // a full bucket again: still ended
	if err := conn.Message(); !errors.Is(err, streamshed.ErrEnded) {
		t.Fatalf("message after the end: %v", err)
	}
	conn.Done()
	if s := c.Stats(); len(cl.Calls()) != 1 || s.DoubleDone != 0 || s.Inflight != 0 {
		t.Fatalf("after Done: %d closes, %+v", len(cl.Calls()), s)
	}
}

// TestMessagesRefillAtTheRate: an empty bucket of a configured limit takes
// one message more per interval, and not before.
func TestMessagesRefillAtTheRate(t *testing.T) {
	clk := newFrozen()
	g, _ := newGuard(t, clk.Now, streamshed.WithMessageLimit(2, ratelimit.Per(4, time.Second)))
	conn, _, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatal(err)
	}
	defer conn.Done()
	now := clk.Now()
	for i := range 2 {
		if err := conn.MessageAt(now); err != nil {
			t.Fatalf("burst message %d: %v", i, err)
		}
	}
	for k := int64(1); k <= 20; k++ {
		at := now + k*int64(250*time.Millisecond)
		if err := conn.MessageAt(at); err != nil {
			t.Fatalf("message at interval %d: %v", k, err)
		}
	}
	last := now + 20*int64(250*time.Millisecond)
	if err := conn.MessageAt(last + int64(250*time.Millisecond) - 1); !errors.Is(err, streamshed.ErrPolicyViolation) {
		t.Fatalf("a message 1 ns early: %v", err)
	}
}

// TestContextEndClosesGoingAwayAndGivesTheTokenBack: when Open's context
// ends, the connection is closed with 1001 and its permit comes back
// without Done.
func TestContextEndClosesGoingAwayAndGivesTheTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, c := newGuard(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		conn, _, err := g.Open(ctx, alice())
		if err != nil || conn == nil {
			t.Fatal(err)
		}
		var cl closes
		conn.Bind(cl.Close)
		cancel()
		synctest.Wait()
		if calls := cl.Calls(); len(calls) != 1 || calls[0].code != streamshed.GoingAway {
			t.Fatalf("close calls %+v", calls)
		}
		if n := inflight(c); n != 0 {
			t.Fatalf("inflight %d after the context ended", n)
		}
		if err := conn.Message(); !errors.Is(err, streamshed.ErrEnded) {
			t.Fatalf("message after the end: %v", err)
		}
		conn.Done()
	})
}

// TestBindAfterTheEndClosesAtOnce: a connection upgraded after its Conn
// ended (the context ended during the upgrade) is closed by Bind.
func TestBindAfterTheEndClosesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGuard(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		conn, _, err := g.Open(ctx, alice())
		if err != nil || conn == nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		var cl closes
		conn.Bind(cl.Close)
		if calls := cl.Calls(); len(calls) != 1 || calls[0].code != streamshed.GoingAway {
			t.Fatalf("close calls %+v", calls)
		}
	})
}

// TestDoneDoesNotClose: Done is the end of a connection its handler closed;
// it does not call the CloseFunc.
func TestDoneDoesNotClose(t *testing.T) {
	g, c := newGuard(t, nil)
	conn, _, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatal(err)
	}
	var cl closes
	conn.Bind(cl.Close)
	conn.Done()
	conn.Bind(cl.Close)
	if calls := cl.Calls(); len(calls) != 0 || inflight(c) != 0 {
		t.Fatalf("close calls %+v, inflight %d", calls, inflight(c))
	}
}

// TestMaxLifetimeEndsTheConnectionBeforeItsLease: with WithMaxLifetime the
// connection is closed (1001) at its lifetime and its permit is back,
// while the lease had an hour left.
func TestMaxLifetimeEndsTheConnectionBeforeItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, c := newGuard(t, nil, streamshed.WithMaxLifetime(30*time.Minute))
		conn, _, err := g.Open(context.Background(), alice())
		if err != nil || conn == nil {
			t.Fatal(err)
		}
		defer conn.Done()
		var cl closes
		conn.Bind(cl.Close)
		time.Sleep(30*time.Minute - 1)
		synctest.Wait()
		if calls := cl.Calls(); len(calls) != 0 || inflight(c) != 1 {
			t.Fatalf("before the lifetime: close calls %+v, inflight %d", calls, inflight(c))
		}
		time.Sleep(1)
		synctest.Wait()
		if calls := cl.Calls(); len(calls) != 1 || calls[0].code != streamshed.GoingAway || calls[0].reason != "connection lifetime reached" {
			t.Fatalf("at the lifetime: close calls %+v", calls)
		}
		if n := inflight(c); n != 0 {
			t.Fatalf("inflight %d after the lifetime", n)
		}
	})
}

// TestEveryEndAtOnceGivesTheTokenBackOnce: messages over the limit, Done
// and the context's end racing end the Conn once: at most one close, the
// permit back once.
func TestEveryEndAtOnceGivesTheTokenBackOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, c := newGuard(t, nil, streamshed.WithMessageLimit(1, ratelimit.Per(1, time.Hour)))
		for range 50 {
			ctx, cancel := context.WithCancel(context.Background())
			conn, _, err := g.Open(ctx, alice())
			if err != nil || conn == nil {
				t.Fatal(err)
			}
			var cl closes
			conn.Bind(cl.Close)
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { _ = conn.Message() })
			}
			wg.Go(conn.Done)
			wg.Go(cancel)
			wg.Wait()
			synctest.Wait() // an end by the context's callback may still be closing
			if calls := cl.Calls(); len(calls) > 1 {
				t.Fatalf("close calls %+v", calls)
			}
			if s := c.Stats(); s.Inflight != 0 || s.DoubleDone != 0 {
				t.Fatalf("inflight %d, double done %d", s.Inflight, s.DoubleDone)
			}
			time.Sleep(time.Minute) // the per-IP rate rule refills
		}
	})
}

// TestNewGuardRejectsBadValues: constructor errors, never a clamp.
func TestNewGuardRejectsBadValues(t *testing.T) {
	c, err := shed.New(connectRules())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad := map[string][]streamshed.Option{
		"zero burst":        {streamshed.WithMessageLimit(0, ratelimit.Per(10, time.Second))},
		"negative burst":    {streamshed.WithMessageLimit(-1, ratelimit.Per(10, time.Second))},
		"zero rate":         {streamshed.WithMessageLimit(50, ratelimit.Rate{})},
		"negative period":   {streamshed.WithMessageLimit(50, ratelimit.Per(1, -time.Second))},
		"negative lifetime": {streamshed.WithMaxLifetime(-time.Second)},
		"nil clock":         {streamshed.WithClock(nil)},
		"nil attempt":       {streamshed.WithAttempt(nil)},
		"nil option":        {nil},
	}
	for name, opts := range bad {
		if g, err := streamshed.NewGuard(c, opts...); err == nil || g != nil || !strings.HasPrefix(err.Error(), "streamshed: ") {
			t.Errorf("%s: %v, %v", name, g, err)
		}
	}
	if _, err := streamshed.NewGuard(nil); err == nil {
		t.Error("a nil Controller was accepted")
	}
}

// TestOpenDecidesOnTheControllersClock: a Guard on its own clock still
// decides openings at the Controller's time, so that the Controller's
// clock alone says when a refused address may connect again.
func TestOpenDecidesOnTheControllersClock(t *testing.T) {
	clk := newFrozen()
	c, err := shed.New(connectRules(), shed.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := streamshed.NewGuard(c) // messages on the internal clock
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		conn, _, err := g.Open(context.Background(), alice())
		if err != nil || conn == nil {
			t.Fatal("refused within the rate", err)
		}
		conn.Done()
	}
	if conn, d, _ := g.Open(context.Background(), alice()); conn != nil || d.RetryAfter != 20*time.Second {
		t.Fatalf("fourth: %v %+v", conn, d)
	}
	clk.Add(20 * time.Second)
	conn, d, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatalf("after 20 s on the Controller's clock: %+v, %v", d, err)
	}
	conn.Done()
}

// TestCloseFuncPanicStillGivesThePermitBack: a CloseFunc that panics (a
// library's bug) does not keep the connection's permit; the panic goes on.
func TestCloseFuncPanicStillGivesThePermitBack(t *testing.T) {
	clk := newFrozen()
	g, c := newGuard(t, clk.Now, streamshed.WithMessageLimit(1, ratelimit.Per(1, time.Hour)))
	conn, _, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatal(err)
	}
	conn.Bind(func(int, string) error { panic("close panics") })
	_ = conn.Message()
	func() {
		defer func() {
			if p := recover(); p != "close panics" {
				t.Fatalf("recovered %v", p)
			}
		}()
		_ = conn.Message()
	}()
	if s := c.Stats(); s.Inflight != 0 || g.Stats().Open != 0 {
		t.Fatalf("after the panic: inflight %d, guard %+v", s.Inflight, g.Stats())
	}
}

// TestDoneOfNoConnDoesNothing: the Conn of a refused Open is nil, and its
// Done may be deferred all the same.
func TestDoneOfNoConnDoesNothing(t *testing.T) {
	var conn *streamshed.Conn
	conn.Done()
}
