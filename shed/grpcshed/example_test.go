package grpcshed_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/grpcshed"
)

// Two checks a minute per API key on one method, in front of a gRPC
// server: the third call is refused with ResourceExhausted and told when
// to come back.
func Example() {
	sluice, err := shed.New([]shed.Rule{{Name: "checks-per-key", Category: "/grpc.health.v1.Health/Check",
		Identity: shed.APIKey, Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(2, time.Minute)}},
		shed.WithClock(func() int64 { return 1 << 40 })) // a stopped clock, for the output
	if err != nil {
		panic(err)
	}
	guard, err := grpcshed.NewServer(sluice, grpcshed.WithMetadataKeys(grpcshed.MetadataKeys{APIKey: "x-api-key"}))
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(guard.Unary), grpc.ChainStreamInterceptor(guard.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := bufconn.Listen(1 << 16) // a real server listens on TCP
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cc, err := grpc.NewClient("passthrough:///example",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	for range 3 {
		var trailer metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Printf(": retry in %v (pushback %s ms)", ri.GetRetryDelay().AsDuration(), trailer.Get(grpcshed.PushbackKey)[0])
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted: retry in 30s (pushback 30000 ms)
}
