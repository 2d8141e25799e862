package grpcshed

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// retryInfo returns the RetryInfo delay of err's status, and whether it
// has one.
func retryInfo(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// pushback returns the grpc-retry-pushback-ms value of trailer.
func pushback(t *testing.T, trailer metadata.MD) string {
	t.Helper()
	v := trailer.Get(PushbackKey)
	if len(v) != 1 {
		t.Fatalf("trailer %s: %q, want one value", PushbackKey, v)
	}
	return v[0]
}

func servedBy(s *Server) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.UnaryInterceptor(s.Unary), grpc.StreamInterceptor(s.Stream)}
}

func TestOverLimitIsResourceExhaustedWithRetryInfoNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket,
			Limit: 1, Rate: ratelimit.Per(1, time.Minute)}})
		h := &health{}
		cl := newRig(t, h, servedBy(mustServer(t, c))...).dial(t)
		ctx := context.Background()
		if err := check(ctx, cl); err != nil {
			t.Fatal(err)
		}
		var trailer metadata.MD
		err := check(ctx, cl, grpc.Trailer(&trailer))
		if got := status.Code(err); got != codes.ResourceExhausted {
			t.Fatalf("second call: %v, want ResourceExhausted", err)
		}
		delay, ok := retryInfo(err)
		if !ok || delay <= 0 || delay > time.Minute {
			t.Fatalf("RetryInfo %v (present %v), want in (0, 1m]", delay, ok)
		}
		ms, perr := strconv.ParseInt(pushback(t, trailer), 10, 64)
		if perr != nil || time.Duration(ms)*time.Millisecond < delay || time.Duration(ms-1)*time.Millisecond >= delay {
			t.Fatalf("pushback %d ms for a delay of %v: want it rounded up to the millisecond", ms, delay)
		}
		if h.calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1 (the rejected call never reaches it)", h.calls.Load())
		}
		// Told to come back after delay: the call then is admitted.
		time.Sleep(delay)
		if err := check(ctx, cl); err != nil {
			t.Fatalf("after the RetryInfo delay: %v", err)
		}
	})
}

func TestServerSheddingIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
		release := make(chan struct{})
		h := &health{check: func(context.Context) error { <-release; return nil }}
		cl := newRig(t, h, servedBy(mustServer(t, c))...).dial(t)
		ctx := context.Background()
		first := make(chan error, 1)
		go func() { first <- check(ctx, cl) }()
		synctest.Wait()
		var trailer metadata.MD
		err := check(ctx, cl, grpc.Trailer(&trailer))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call over the cap: %v, want Unavailable", err)
		}
		if d, ok := retryInfo(err); !ok || d != time.Second {
			t.Fatalf("RetryInfo %v (present %v), want the 1s hint", d, ok)
		}
		if got := pushback(t, trailer); got != "1000" {
			t.Fatalf("pushback %q, want 1000", got)
		}
		if n := c.Stats().Inflight; n != 1 {
			t.Fatalf("inflight %d while the first call runs, want 1", n)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := c.Stats().Inflight; n != 0 {
			t.Fatalf("inflight %d after the calls, want 0", n)
		}
	})
}

func TestCostAboveLimitSaysNeverRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 2}})
		s := mustServer(t, c, WithCost(func(string) int64 { return 3 }))
		cl := newRig(t, &health{}, servedBy(s)...).dial(t)
		var trailer metadata.MD
		err := check(context.Background(), cl, grpc.Trailer(&trailer))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want Unavailable", err)
		}
		if d, ok := retryInfo(err); ok {
			t.Fatalf("RetryInfo %v for a call that can never be admitted, want none", d)
		}
		if got := pushback(t, trailer); got != "-1" {
			t.Fatalf("pushback %q, want -1 (do not retry)", got)
		}
	})
}

func TestBrokenDecisionIsUnavailableNotAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 2}})
		h := &health{}
		s := mustServer(t, c, WithCost(func(string) int64 { return -1 }))
		err := check(context.Background(), newRig(t, h, servedBy(s)...).dial(t))
		if status.Code(err) != codes.Unavailable || h.calls.Load() != 0 {
			t.Fatalf("negative cost: %v, handler calls %d; want Unavailable and no call", err, h.calls.Load())
		}
	})
}

func TestKeysOnMetadataAndFullMethod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "check-per-key", Category: checkMethod, Identity: shed.APIKey,
			Algorithm: shed.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}})
		s := mustServer(t, c, WithMetadataKeys(MetadataKeys{APIKey: "x-api-key"}))
		cl := newRig(t, &health{}, servedBy(s)...).dial(t)
		key := func(k string) context.Context {
			return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", k)
		}
		if err := check(key("a"), cl); err != nil {
			t.Fatal(err)
		}
		if err := check(key("a"), cl); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("key a again: %v, want ResourceExhausted", err)
		}
		if err := check(key("b"), cl); err != nil {
			t.Fatalf("key b: %v, want admitted (its own bucket)", err)
		}
		if err := check(context.Background(), cl); err != nil {
			t.Fatalf("no key: %v, want admitted (the rule does not apply)", err)
		}
		st, err := cl.Watch(key("a"), &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			t.Fatalf("key a on Watch: %v, want admitted (another method's category)", err)
		}
	})
}

func TestWithClientOverridesMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "per-tenant", Identity: shed.Tenant,
			Algorithm: shed.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}})
		s := mustServer(t, c, WithMetadataKeys(MetadataKeys{Tenant: "x-tenant"}),
			WithClient(func(_ context.Context, method string, md metadata.MD) shed.Client {
				if v := md.Get("x-org"); len(v) > 0 && method == checkMethod {
					return shed.Client{Tenant: v[0]}
				}
				return shed.Client{}
			}))
		cl := newRig(t, &health{}, servedBy(s)...).dial(t)
		md := func(kv ...string) context.Context {
			return metadata.AppendToOutgoingContext(context.Background(), kv...)
		}
		if err := check(md("x-tenant", "t1", "x-org", "acme"), cl); err != nil {
			t.Fatal(err)
		}
		if err := check(md("x-tenant", "t2", "x-org", "acme"), cl); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("same org, other x-tenant: %v, want ResourceExhausted (WithClient's tenant wins)", err)
		}
		if err := check(md("x-tenant", "t1"), cl); err != nil {
			t.Fatalf("x-tenant t1 alone: %v, want admitted (tenant t1 has its own bucket)", err)
		}
	})
}

func TestPerIPKeysOnPeerAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "per-ip", Identity: shed.IP,
			Algorithm: shed.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}})
		s := mustServer(t, c)
		r := newRig(t, &health{}, servedBy(s)...)
		one, two := r.dial(t), r.dial(t)
		ctx := context.Background()
		if err := check(ctx, one); err != nil {
			t.Fatal(err)
		}
		if err := check(ctx, one); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("same peer again: %v, want ResourceExhausted", err)
		}
		if err := check(ctx, two); err != nil {
			t.Fatalf("another peer: %v, want admitted", err)
		}
		if n := s.Stats().UnknownPeers; n != 0 {
			t.Fatalf("unknown peers %d, want 0", n)
		}
	})
}

func TestForwardedForOnlyFromTrustedProxy(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(strconv.FormatBool(trusted), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := mustController(t, []shed.Rule{{Name: "per-ip", Identity: shed.IP,
					Algorithm: shed.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}})
				var opts []Option
				if trusted {
					opts = append(opts, WithResolver(mustResolver(t, "10.0.0.0/8")))
				}
				r := newRig(t, &health{}, servedBy(mustServer(t, c, opts...))...)
				// Two proxies (two peers) forward the same client.
				ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "203.0.113.7")
				if err := check(ctx, r.dial(t)); err != nil {
					t.Fatal(err)
				}
				err := check(ctx, r.dial(t))
				if trusted && status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("trusted proxies forwarding one client: %v, want ResourceExhausted", err)
				}
				if !trusted && err != nil {
					t.Fatalf("untrusted peers: %v, want admitted (the header is not believed)", err)
				}
			})
		})
	}
}

func TestStreamHoldsPermitUntilClientGoesAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
		h := &health{watch: func(st healthpb.Health_WatchServer) error {
			if err := st.Send(&healthpb.HealthCheckResponse{}); err != nil {
				return err
			}
			<-st.Context().Done()
			return st.Context().Err()
		}}
		cl := newRig(t, h, servedBy(mustServer(t, c))...).dial(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		open := func(ctx context.Context) error {
			st, err := cl.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}
		if err := open(ctx); err != nil {
			t.Fatal(err)
		}
		if err := open(context.Background()); status.Code(err) != codes.Unavailable {
			t.Fatalf("second stream while the first is open: %v, want Unavailable", err)
		}
		cancel()
		synctest.Wait()
		if n := c.Stats().Inflight; n != 0 {
			t.Fatalf("inflight %d after the client went away, want 0", n)
		}
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		if err := open(ctx2); err != nil {
			t.Fatalf("a stream after the first ended: %v", err)
		}
	})
}

func TestQueuedCallShedByItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1,
			MaxWait: time.Hour, Queue: shed.Queue{DeadlineAware: true}}})
		h := &health{check: func(context.Context) error { time.Sleep(10 * time.Second); return nil }}
		cl := newRig(t, h, servedBy(mustServer(t, c))...).dial(t)
		// A backlog served one call per 10s teaches the queue its rate.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- check(context.Background(), cl) })
		}
		time.Sleep(45 * time.Second) // four served, four queued
		// A call with 5s left, behind 40s of queue, is shed at once: the
		// deadline grpc-timeout carried reached the queue.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := check(ctx, cl)
		if status.Code(err) != codes.Unavailable || time.Since(start) != 0 {
			t.Fatalf("short deadline behind a backlog: %v after %v, want Unavailable at once", err, time.Since(start))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("backlog call: %v", err)
			}
		}
	})
}
