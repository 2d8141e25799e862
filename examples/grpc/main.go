// Command grpc protects a gRPC service with sluice and shows a client that
// honours it. The server allows 3 calls per API key at once and then 4 a
// second (a token bucket per key, read from the x-api-key metadata), and
// at most 2 calls at a time in the whole process. A client over its
// key's limit gets ResourceExhausted; a call the server sheds gets
// Unavailable; both carry google.rpc.RetryInfo and grpc-retry-pushback-ms.
// A client built with grpcshed.NewClient waits as long as it is told and
// retries, so a burst that a plain client sees refused gets through.
//
//	go run ./examples/grpc              # serve on 127.0.0.1:8090
//	go run ./examples/grpc -selftest    # drive it from both clients
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/grpcshed"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	selftest := flag.Bool("selftest", false, "serve on 127.0.0.1:0, drive it from a plain and a sluice client, print what happened and exit")
	flag.Parse()
	if *selftest {
		if err := selfTest(os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	srv, _, err := newServer()
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("grpc.health.v1.Health on %s: 3 calls at once then 4/s per x-api-key, 2 calls at a time (service \"slow\" holds on)\n", lis.Addr())
	fmt.Printf("try: for i in $(seq 6); do grpcurl -plaintext -H 'x-api-key: k1' %s grpc.health.v1.Health/Check; done\n", lis.Addr())
	log.Fatal(srv.Serve(lis))
}

// newServer returns the protected gRPC server and its service.
func newServer() (*grpc.Server, *service, error) {
	sluice, err := shed.New([]shed.Rule{
		{Name: "per-key", Identity: shed.APIKey, Algorithm: shed.TokenBucket, Limit: 3, Rate: ratelimit.Per(4, time.Second)},
		{Name: "at-once", Algorithm: shed.Concurrency, Limit: 2},
	})
	if err != nil {
		return nil, nil, err
	}
	// Rules of category "" apply to every method; a rule of category
	// "/grpc.health.v1.Health/Check" would apply to that one.
	guard, err := grpcshed.NewServer(sluice, grpcshed.WithMetadataKeys(grpcshed.MetadataKeys{APIKey: "x-api-key"}))
	if err != nil {
		return nil, nil, err
	}
	svc := &service{entered: make(chan struct{}, 16), release: make(chan struct{})}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(guard.Unary), grpc.ChainStreamInterceptor(guard.Stream))
	healthpb.RegisterHealthServer(srv, svc)
	reflection.Register(srv) // for grpcurl
	return srv, svc, nil
}

// service is the health service standing in for real work: a check of the
// service "slow" waits until release is closed (or the call ends).
type service struct {
	healthpb.UnimplementedHealthServer
	entered chan struct{}
	release chan struct{}
}

func (s *service) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.GetService() == "slow" {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// outcome is what one call got back.
type outcome struct {
	code  codes.Code
	retry time.Duration // RetryInfo; 0 when none
}

func (o outcome) String() string {
	if o.retry > 0 {
		return fmt.Sprintf("%v (retry in %v)", o.code, o.retry.Round(time.Millisecond))
	}
	return o.code.String()
}
