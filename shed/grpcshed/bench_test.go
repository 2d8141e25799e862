package grpcshed

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// BenchmarkUnary puts the unary interceptor beside a bare handler call, on
// a call's context as gRPC builds it (a TCP peer, incoming metadata with an
// API key), with limits that never reject: the interceptor's own cost per
// call. The per-key case keys the call on its API key in the memory store;
// decide_* is shed.Controller.Decide and Token.Done alone on the same
// attempt, what the interceptor adds to it is the difference.
func BenchmarkUnary(b *testing.B) {
	ctx := metadata.NewIncomingContext(peerCtx(), metadata.Pairs("x-api-key", "k-1", "user-agent", "bench"))
	info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	rules := map[string][]shed.Rule{
		"global_cap": {{Name: "cap", Algorithm: shed.Concurrency, Limit: math.MaxInt32}},
		"per_key_rate": {{Name: "per-key", Identity: shed.APIKey, Algorithm: shed.TokenBucket,
			Limit: math.MaxInt32, Rate: ratelimit.Per(100_000_000, time.Second)}},
	}
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = handler(ctx, nil)
			}
		})
	})
	for _, name := range []string{"global_cap", "per_key_rate"} {
		b.Run("grpcshed_"+name, func(b *testing.B) {
			c, err := shed.New(rules[name], quiet())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := NewServer(c, WithMetadataKeys(MetadataKeys{APIKey: "x-api-key"}))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Unary(ctx, nil, info, handler); err != nil {
				b.Fatalf("the benchmark's call is rejected: %v", err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Unary(ctx, nil, info, handler); err != nil {
						b.Fatal(err)
					}
				}
			})
			if st := c.Stats(); st.OverLimit+st.Shedding != 0 || st.Inflight != 0 {
				b.Fatalf("stats %+v: the benchmark rejected or leaked", st)
			}
		})
		b.Run("decide_"+name, func(b *testing.B) {
			c, err := shed.New(rules[name], quiet())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := NewServer(c, WithMetadataKeys(MetadataKeys{APIKey: "x-api-key"}))
			if err != nil {
				b.Fatal(err)
			}
			at, _ := s.cfg.attempt(ctx, checkMethod, mdSource{ctx: ctx})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d, tok, err := c.Decide(ctx, at)
					if err != nil || !d.Allowed {
						b.Fatal(err, d.Kind)
					}
					tok.Done(shed.Success)
				}
			})
		})
	}
}
