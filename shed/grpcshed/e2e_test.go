package grpcshed

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/shed"
)

// TestEndToEndOverTCP runs the server and client halves over a loopback
// TCP connection, in real time: with one call at a time allowed, a call
// that arrives while another runs is shed (Unavailable, come back in 1s);
// the client waits as told, sends it again and gets through. Every wait is
// bounded by the test's context; nothing asserts on timing.
func TestEndToEndOverTCP(t *testing.T) {
	admitted, rejected := make(chan struct{}, 1), make(chan struct{}, 1)
	c := mustController(t, []shed.Rule{{Name: "one-at-a-time", Algorithm: shed.Concurrency, Limit: 1}},
		shed.WithDecisionHook(func(d shed.Decision) {
			ch := rejected
			if d.Allowed {
				ch = admitted
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}))
	srv := mustServer(t, c)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	h := &health{check: func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}
	gs := grpc.NewServer(servedBy(srv)...)
	healthpb.RegisterHealthServer(gs, h)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	defer func() { gs.Stop(); <-done }()

	cl := mustClient(t)
	cc, err := grpc.NewClient(lis.Addr().String(), append(through(cl),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- check(ctx, hc) }()
	select { // the first call holds the permit
	case <-admitted:
	case <-ctx.Done():
		t.Fatal("the first call was never admitted")
	}
	go func() { second <- check(ctx, hc) }()
	select {
	case <-rejected:
	case <-ctx.Done():
		t.Fatal("the second call was never shed")
	}
	close(release)
	for i, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	s := c.Stats()
	if h.calls.Load() != 2 || s.Admitted != 2 || s.Shedding != 1 || cl.Stats().Retries != 1 || cl.Stats().Waits != 1 {
		t.Fatalf("served %d, controller %+v, client %+v: want 2 served, 1 shed, waited for and retried",
			h.calls.Load(), s, cl.Stats())
	}
	if srv.Stats().UnknownPeers != 0 {
		t.Fatal("a TCP peer was not understood")
	}
}
