package grpcshed

import (
	"context"
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

func TestTapRejectsBeforeTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		front := mustController(t, []shed.Rule{{Name: "opens-per-key", Identity: shed.APIKey,
			Algorithm: shed.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Minute)}})
		tp, err := NewTap(front, WithMetadataKeys(MetadataKeys{APIKey: "x-api-key"}))
		if err != nil {
			t.Fatal(err)
		}
		intercepted := 0
		h := &health{}
		cl := newRig(t, h, grpc.InTapHandle(tp.Handle),
			grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
				intercepted++
				return next(ctx, req)
			})).dial(t)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k1")
		if err := check(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if n := front.Stats().Inflight; n != 0 {
			t.Fatalf("the tap holds %d after admitting, want 0 (it cannot know when the call ends)", n)
		}
		err = check(ctx, cl)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("second call: %v, want ResourceExhausted", err)
		}
		delay, ok := retryInfo(err)
		if !ok || delay <= 0 || delay > time.Minute {
			t.Fatalf("RetryInfo %v (present %v), want in (0, 1m]", delay, ok)
		}
		if h.calls.Load() != 1 || intercepted != 1 {
			t.Fatalf("handler %d, interceptor %d calls: want 1 each (the rejection came first)", h.calls.Load(), intercepted)
		}
		// Streams are tapped alike, and another key has its own bucket.
		other := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k2")
		st, err := cl.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("stream of the limited key: %v, want ResourceExhausted", err)
		}
		if err := check(other, cl); err != nil {
			t.Fatalf("another key: %v", err)
		}
		time.Sleep(delay)
		if err := check(ctx, cl); err != nil {
			t.Fatalf("after the RetryInfo delay: %v", err)
		}
	})
}

func TestTapBeforeServerDecidesEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		front := mustController(t, []shed.Rule{{Name: "opens-per-ip", Identity: shed.IP,
			Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute)}})
		back := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
		tp, err := NewTap(front)
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h := &health{check: func(context.Context) error { <-release; return nil }}
		cl := newRig(t, h, append(servedBy(mustServer(t, back)), grpc.InTapHandle(tp.Handle))...).dial(t)
		first := make(chan error, 1)
		go func() { first <- check(context.Background(), cl) }()
		synctest.Wait()
		if err := check(context.Background(), cl); status.Code(err) != codes.Unavailable {
			t.Fatalf("second call, past the tap, over the server's cap: %v, want Unavailable", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := check(context.Background(), cl); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("third call, over the tap's rate: %v, want ResourceExhausted", err)
		}
		synctest.Wait()
		if a, b := front.Stats().Inflight, back.Stats().Inflight; a != 0 || b != 0 {
			t.Fatalf("inflight tap %d, server %d after the calls; want 0, 0", a, b)
		}
	})
}

// TestClientHonoursATapRejection: an early rejection carries no trailer,
// only the status; its RetryInfo is enough for a Client.
func TestClientHonoursATapRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp, err := NewTap(mustController(t, oneEvery(3*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		st := &stamps{}
		cl := mustClient(t)
		conn := newRig(t, &health{check: st.check}, grpc.InTapHandle(tp.Handle)).dial(t, through(cl)...)
		start := time.Now()
		for i := range 2 {
			if err := check(context.Background(), conn); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if at := st.times(); len(at) != 2 || at[1].Sub(start) < 3*time.Second {
			t.Fatalf("served at %v, want the retry no earlier than 3s", offsets(start, at))
		}
		if s := cl.Stats(); s.Retries != 1 {
			t.Fatalf("stats %+v, want one retry", s)
		}
	})
}
