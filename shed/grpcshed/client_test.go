package grpcshed

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

func mustClient(t *testing.T, opts ...ClientOption) *Client {
	t.Helper()
	c, err := NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func through(c *Client) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream)}
}

// stamps records when the handler ran.
type stamps struct {
	mu sync.Mutex
	at []time.Time
}

func (s *stamps) check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	return nil
}

func (s *stamps) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

// oneEvery is a rule admitting one call per d.
func oneEvery(d time.Duration) []shed.Rule {
	return []shed.Rule{{Name: "one", Algorithm: shed.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, d)}}
}

func TestClientRetriesAfterRetryInfoNeverEarlier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stamps{}
		srv := mustServer(t, mustController(t, oneEvery(3*time.Second)))
		cl := mustClient(t)
		conn := newRig(t, &health{check: st.check}, servedBy(srv)...).dial(t, through(cl)...)
		start := time.Now()
		for i := range 2 {
			if err := check(context.Background(), conn); err != nil {
				t.Fatalf("call %d: %v, want admitted after a retry", i, err)
			}
		}
		at := st.times()
		if len(at) != 2 || at[1].Sub(start) < 3*time.Second {
			t.Fatalf("the server ran the calls at %v after start, want the second no earlier than 3s", offsets(start, at))
		}
		if s := cl.Stats(); s.Retries != 1 {
			t.Fatalf("stats %+v, want one retry", s)
		}
	})
}

func offsets(start time.Time, at []time.Time) []time.Duration {
	var d []time.Duration
	for _, t := range at {
		d = append(d, t.Sub(start))
	}
	return d
}

func TestClientPausesEveryCallToTheTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stamps{}
		srv := mustServer(t, mustController(t, oneEvery(3*time.Second)))
		cl := mustClient(t, WithMaxRetries(0))
		r := newRig(t, &health{check: st.check}, servedBy(srv)...)
		a, b := r.dial(t, through(cl)...), r.dial(t, through(cl)...) // one target
		start := time.Now()
		if err := check(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if err := check(context.Background(), a); status.Code(err) != codes.Unavailable {
			t.Fatalf("second call, not retried: %v, want Unavailable", err)
		}
		// Another connection to the same target waits for the pause.
		if err := check(context.Background(), b); err != nil {
			t.Fatalf("a call during the pause: %v, want admitted once it passed", err)
		}
		at := st.times()
		if len(at) != 2 || at[1].Sub(start) < 3*time.Second {
			t.Fatalf("the paused call reached the server at %v, before the 3s it was told", at[1].Sub(start))
		}
		if s := cl.Stats(); s.Waits != 1 || s.Retries != 0 {
			t.Fatalf("stats %+v, want one wait, no retry", s)
		}
	})
}

func TestClientFailsFastWhenTheDeadlineFallsInThePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &health{}
		c := mustController(t, oneEvery(time.Minute))
		srv := mustServer(t, c)
		cl := mustClient(t, WithMaxRetries(0))
		conn := newRig(t, h, servedBy(srv)...).dial(t, through(cl)...)
		_ = check(context.Background(), conn)
		_ = check(context.Background(), conn) // rejected: a pause of a minute
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := check(ctx, conn)
		if status.Code(err) != codes.Unavailable || time.Since(start) != 0 {
			t.Fatalf("%v after %v, want Unavailable at once", err, time.Since(start))
		}
		if d, ok := retryInfo(err); !ok || d <= 5*time.Second || d > time.Minute {
			t.Fatalf("local RetryInfo %v (present %v), want the pause left", d, ok)
		}
		if n := c.Stats().Admitted + c.Stats().Shedding; n != 2 {
			t.Fatalf("server decided %d calls, want 2 (the third never sent)", n)
		}
		// A retry that cannot wait returns the server's rejection.
		cl2 := mustClient(t, WithMaxWait(time.Second))
		conn2 := newRig(t, h, servedBy(mustServer(t, mustController(t, oneEvery(time.Minute))))...).dial(t, through(cl2)...)
		_ = check(context.Background(), conn2)
		err = check(context.Background(), conn2)
		if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "grpcshed: shedding load" {
			t.Fatalf("retry past the max wait: %v, want the server's rejection", err)
		}
		if s := cl2.Stats(); s.FailedFast != 1 || s.Retries != 1 {
			t.Fatalf("stats %+v, want one retry failed fast", s)
		}
	})
}

func TestClientRetryBudgetBoundsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A server that rejects every call, asking for 100ms.
		h := &health{check: func(ctx context.Context) error {
			st, trailer := Rejection(shed.Decision{Kind: shed.Shedding, RetryAfter: 100 * time.Millisecond})
			_ = grpc.SetTrailer(ctx, trailer)
			return st.Err()
		}}
		cl := mustClient(t, WithRetryBudget(0.5, 1), WithMaxRetries(5))
		conn := newRig(t, h).dial(t, through(cl)...)
		for range 10 {
			if err := check(context.Background(), conn); status.Code(err) != codes.Unavailable {
				t.Fatalf("%v, want Unavailable", err)
			}
		}
		// The budget starts with its burst, 1 retry, spent by the first
		// call; then every call adds half a retry: calls 3, 5, 7 and 9
		// retry once. Every call ends with a refused retry.
		if s := cl.Stats(); s.Retries != 5 || s.NoBudget != 10 || h.calls.Load() != 15 {
			t.Fatalf("stats %+v, %d calls sent; want 5 retries, 10 refused, 15 sent", s, h.calls.Load())
		}
	})
}

func TestClientNeverRetriesNegativePushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &health{}
		c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
		srv := mustServer(t, c, WithCost(func(string) int64 { return 2 }))
		cl := mustClient(t)
		conn := newRig(t, h, servedBy(srv)...).dial(t, through(cl)...)
		var trailer metadata.MD
		err := check(context.Background(), conn, grpc.Trailer(&trailer))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want Unavailable", err)
		}
		if got := trailer.Get(PushbackKey); len(got) != 1 || got[0] != "-1" {
			t.Fatalf("the caller's own trailer %v, want the pushback -1 kept", trailer)
		}
		if s := cl.Stats(); s.Retries != 0 || s.Waits != 0 {
			t.Fatalf("stats %+v, want no retry and no pause", s)
		}
	})
}

func TestClientLeavesOtherFailuresAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &health{check: func(context.Context) error { return status.Error(codes.Unavailable, "down") }}
		cl := mustClient(t)
		conn := newRig(t, h).dial(t, through(cl)...)
		for range 3 {
			if err := check(context.Background(), conn); status.Code(err) != codes.Unavailable {
				t.Fatalf("%v, want the server's Unavailable", err)
			}
		}
		if s := cl.Stats(); s != (ClientStats{}) || h.calls.Load() != 3 {
			t.Fatalf("stats %+v, %d calls: an Unavailable that says nothing of when is not paused or retried", s, h.calls.Load())
		}
	})
}

func TestClientStreamLearnsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stamps{}
		h := &health{watch: func(s healthpb.Health_WatchServer) error {
			_ = st.check(s.Context())
			return s.Send(&healthpb.HealthCheckResponse{})
		}}
		srv := mustServer(t, mustController(t, oneEvery(3*time.Second)))
		cl := mustClient(t)
		conn := newRig(t, h, servedBy(srv)...).dial(t, through(cl)...)
		watch := func() error {
			s, err := conn.Watch(context.Background(), &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}
		start := time.Now()
		if err := watch(); err != nil {
			t.Fatal(err)
		}
		if err := watch(); status.Code(err) != codes.Unavailable {
			t.Fatalf("second stream: %v, want Unavailable (streams are not retried)", err)
		}
		if err := watch(); err != nil {
			t.Fatalf("third stream: %v, want admitted after the pause", err)
		}
		if at := st.times(); len(at) != 2 || at[1].Sub(start) < 3*time.Second {
			t.Fatalf("streams reached the server at %v, want the third after 3s", offsets(start, at))
		}
	})
}

func TestRetryDelayReadsBothHints(t *testing.T) {
	st, _ := Rejection(shed.Decision{Kind: shed.OverLimit, RetryAfter: 2 * time.Second})
	for _, tc := range []struct {
		name     string
		pushback []string
		want     time.Duration
		ok       bool
	}{
		{"RetryInfo alone", nil, 2 * time.Second, true},
		{"later pushback", []string{"5000"}, 5 * time.Second, true},
		{"earlier pushback", []string{"10"}, 2 * time.Second, true},
		{"negative pushback", []string{"-1"}, 0, false},
		{"garbage pushback", []string{"soon"}, 0, false},
		{"two pushbacks", []string{"1", "2"}, 0, false},
		{"huge pushback", []string{"9223372036854775807"}, time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond, true},
	} {
		var md metadata.MD
		if tc.pushback != nil {
			md = metadata.MD{PushbackKey: tc.pushback}
		}
		got, ok := retryDelay(st, md)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := retryDelay(status.New(codes.Unavailable, "x"), nil); ok {
		t.Error("no hint at all: retryDelay found one")
	}
}

func TestClientOptionErrors(t *testing.T) {
	for name, o := range map[string]ClientOption{
		"nil":            nil,
		"negative retry": WithMaxRetries(-1),
		"zero wait":      WithMaxWait(0),
		"NaN ratio":      WithRetryBudget(math.NaN(), 1),
		"ratio above 1":  WithRetryBudget(1.5, 1),
		"negative ratio": WithRetryBudget(-0.1, 1),
		"zero burst":     WithRetryBudget(0.1, 0),
		"huge burst":     WithRetryBudget(0.1, hugeBurst()),
	} {
		if _, err := NewClient(o); err == nil {
			t.Errorf("%s: NewClient accepted it", name)
		}
	}
}

func TestClientTargetTableIsBoundedAndDropsOnlyPassedPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := mustClient(t)
		st, trailer := Rejection(shed.Decision{Kind: shed.OverLimit, RetryAfter: time.Second})
		for i := range DefaultMaxTargets {
			cl.learn("target-"+strconv.Itoa(i), st.Err(), trailer)
		}
		cl.learn("one-too-many", st.Err(), trailer)
		if n := cl.Stats().Untracked; n != 1 {
			t.Fatalf("untracked %d with the table full of live pauses, want 1", n)
		}
		if p := cl.targetOf("target-0", 0, false); p == nil {
			t.Fatal("a live pause was dropped for a new target")
		}
		time.Sleep(time.Second) // every pause has passed: as good as none
		cl.learn("newcomer", st.Err(), trailer)
		if n := cl.Stats().Untracked; n != 1 || cl.targetOf("newcomer", 0, false) == nil {
			t.Fatalf("untracked %d: a new target found no room among passed pauses", n)
		}
	})
}

func TestClientRetryNeverEarlyWhenItsTargetIsUntracked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := mustClient(t)
		st, trailer := Rejection(shed.Decision{Kind: shed.OverLimit, RetryAfter: time.Hour})
		for i := range DefaultMaxTargets { // a table full of live pauses
			cl.learn("target-"+strconv.Itoa(i), st.Err(), trailer)
		}
		stp := &stamps{}
		srv := mustServer(t, mustController(t, oneEvery(3*time.Second)))
		conn := newRig(t, &health{check: stp.check}, servedBy(srv)...).dial(t, through(cl)...)
		start := time.Now()
		for i := range 2 {
			if err := check(context.Background(), conn); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if at := stp.times(); len(at) != 2 || at[1].Sub(start) < 3*time.Second {
			t.Fatalf("served at %v: the retry of an untracked target went before the 3s it was told", offsets(start, at))
		}
	})
}

// hugeBurst returns 2^31, a burst past the largest (where an int has 64
// bits; where it has 32, the sum wraps to a negative burst, refused too).
func hugeBurst() int {
	n := math.MaxInt32
	return n + 1
}
