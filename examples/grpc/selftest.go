package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/shed/grpcshed"
)

// report is what the self-test saw.
type report struct {
	plain, guarded []outcome // a burst of 6 from each client, one key each
	retries        uint64    // the guarded client's
	shed           outcome   // a third slow call while two run
}

// selfTest serves on 127.0.0.1:0 and sends a burst of 6 checks from a
// plain client and from a grpcshed client (a key each), then three slow
// checks at once. It prints what each got and returns an error unless the
// plain client was refused past its key's 3, the guarded one got all 6
// through by waiting as told, and the third slow call was shed.
func selfTest(out io.Writer) error {
	r, err := run(out)
	if err != nil {
		return err
	}
	return r.check()
}

func (r report) check() error {
	for i, o := range r.plain {
		want := codes.OK
		if i >= 3 {
			want = codes.ResourceExhausted
		}
		if o.code != want || (want != codes.OK && o.retry <= 0) {
			return fmt.Errorf("plain call %d: %v, want %v with a RetryInfo", i+1, o, want)
		}
	}
	for i, o := range r.guarded {
		if o.code != codes.OK {
			return fmt.Errorf("guarded call %d: %v, want OK (it waits as told)", i+1, o)
		}
	}
	if r.retries == 0 {
		return fmt.Errorf("the guarded client never retried: the burst made no point")
	}
	if r.shed.code != codes.Unavailable || r.shed.retry <= 0 {
		return fmt.Errorf("third slow call: %v, want Unavailable with a RetryInfo", r.shed)
	}
	return nil
}

func run(out io.Writer) (report, error) {
	var r report
	srv, svc, err := newServer()
	if err != nil {
		return r, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain, closePlain, err := dial(lis.Addr().String())
	if err != nil {
		return r, err
	}
	defer closePlain()
	client, err := grpcshed.NewClient()
	if err != nil {
		return r, err
	}
	guarded, closeGuarded, err := dial(lis.Addr().String(),
		grpc.WithChainUnaryInterceptor(client.Unary), grpc.WithChainStreamInterceptor(client.Stream))
	if err != nil {
		return r, err
	}
	defer closeGuarded()

	fmt.Fprintf(out, "server on %s: 3 at once then 4/s per x-api-key, 2 calls at a time\n", lis.Addr())
	burst := func(label string, c healthpb.HealthClient, key string) []outcome {
		var got []outcome
		kctx := metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		for range 6 {
			got = append(got, call(kctx, c, ""))
		}
		fmt.Fprintf(out, "  %-22s %v\n", label, got)
		return got
	}
	r.plain = burst("plain client, key k1:", plain, "k1")
	r.guarded = burst("grpcshed client, k2:", guarded, "k2")
	r.retries = client.Stats().Retries
	fmt.Fprintf(out, "  the grpcshed client retried %d times, each after the wait it was told\n", r.retries)

	// Two slow calls hold the cap of 2; a third is shed.
	slow := make(chan outcome, 2)
	for i := range 2 {
		kctx := metadata.AppendToOutgoingContext(ctx, "x-api-key", fmt.Sprintf("slow-%d", i))
		go func() { slow <- call(kctx, plain, "slow") }()
	}
	for range 2 {
		select {
		case <-svc.entered:
		case <-ctx.Done():
			return r, fmt.Errorf("the slow calls never started")
		}
	}
	r.shed = call(metadata.AppendToOutgoingContext(ctx, "x-api-key", "slow-2"), plain, "slow")
	close(svc.release)
	held := []outcome{<-slow, <-slow}
	fmt.Fprintf(out, "  slow calls: two running %v, a third %v\n", held, r.shed)
	return r, nil
}

// dial returns a health client of addr and a func that closes it.
func dial(addr string, opts ...grpc.DialOption) (healthpb.HealthClient, func(), error) {
	cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return nil, nil, err
	}
	return healthpb.NewHealthClient(cc), func() { _ = cc.Close() }, nil
}

// call checks service on c and returns what it got.
func call(ctx context.Context, c healthpb.HealthClient, service string) outcome {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	st := status.Convert(err)
	o := outcome{code: st.Code()}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			o.retry = ri.GetRetryDelay().AsDuration()
		}
	}
	return o
}
