package grpcshed

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/shed"
)

// TestPermitsComeBackOnEveryPath: whatever mix of handlers runs through
// the unary and stream interceptors at once (returning, failing with any
// code, panicking, calling runtime.Goexit, with or without their context
// ended first), no admitted call ever exceeds the cap and every permit is
// back afterwards.
func TestPermitsComeBackOnEveryPath(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 4).Draw(rt, "limit")
		c, err := shed.New([]shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: limit}}, quiet())
		if err != nil {
			rt.Fatal(err)
		}
		defer c.Close()
		s, err := NewServer(c)
		if err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 24).Draw(rt, "calls")
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			running int64
			worst   int64
		)
		enter := func() {
			mu.Lock()
			running++
			worst = max(worst, running)
			mu.Unlock()
		}
		leave := func() { mu.Lock(); running--; mu.Unlock() }
		for range n {
			how := rapid.IntRange(0, 4).Draw(rt, "how")
			code := codes.Code(rapid.IntRange(0, 16).Draw(rt, "code"))
			stream := rapid.Bool().Draw(rt, "stream")
			cancelFirst := rapid.Bool().Draw(rt, "cancel")
			wg.Go(func() {
				ctx, cancel := context.WithCancel(peerCtx())
				defer cancel()
				if cancelFirst {
					cancel()
				}
				work := func() error {
					enter()
					defer leave()
					switch how {
					case 1:
						return status.Error(code, "x")
					case 2:
						panic("boom")
					case 3:
						runtime.Goexit()
					}
					return nil
				}
				defer func() { _ = recover() }() // the handler's panic goes on to here
				if stream {
					_ = s.Stream(nil, &fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: watchMethod},
						func(any, grpc.ServerStream) error { return work() })
				} else {
					_, _ = s.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
						func(context.Context, any) (any, error) { return nil, work() })
				}
			})
		}
		wg.Wait()
		if worst > limit {
			rt.Fatalf("%d handlers ran at once under a cap of %d", worst, limit)
		}
		if st := c.Stats(); st.Inflight != 0 {
			rt.Fatalf("inflight %d after every call ended, stats %+v", st.Inflight, st)
		}
	})
}
