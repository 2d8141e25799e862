package grpcshed

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/shed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// health is the service under test: its Check and Watch do what the test
// says (answer SERVING when the func is nil).
type health struct {
	healthpb.UnimplementedHealthServer
	check func(ctx context.Context) error
	watch func(stream healthpb.Health_WatchServer) error
	calls atomic.Int64
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Add(1)
	if h.check != nil {
		if err := h.check(ctx); err != nil {
			return nil, err
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *health) Watch(_ *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.calls.Add(1)
	if h.watch != nil {
		return h.watch(stream)
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// peerListener gives every connection it accepts the peer address
// 10.0.0.N, N counting connections from 1, so that per-IP rules see one
// client per connection over bufconn.
type peerListener struct {
	*bufconn.Listener
	n atomic.Int64
}

func (l *peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.n.Add(1)
	return peerConn{c, &net.TCPAddr{IP: net.IPv4(10, 0, 0, byte(n)), Port: 40000}}, nil
}

type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// rig is a gRPC server over bufconn and a way to dial it.
type rig struct {
	lis *peerListener
	srv *grpc.Server
}

// newRig serves h over bufconn with the server options given, until the
// test ends.
func newRig(t *testing.T, h *health, opts ...grpc.ServerOption) *rig {
	t.Helper()
	r := &rig{lis: &peerListener{Listener: bufconn.Listen(1 << 20)}, srv: grpc.NewServer(opts...)}
	healthpb.RegisterHealthServer(r.srv, h)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.srv.Serve(r.lis) }()
	t.Cleanup(func() { r.srv.Stop(); <-done })
	return r
}

// dial returns a client of r on a connection of its own (a new peer
// address), closed when the test ends.
func (r *rig) dial(t *testing.T, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	return r.dialAs(t, "passthrough:///bufconn", opts...)
}

// dialAs is dial with the ClientConn's target named target.
func (r *rig) dialAs(t *testing.T, target string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return r.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc)
}

func quiet() shed.Option { return shed.WithLogger(slog.New(slog.DiscardHandler)) }

func mustController(t *testing.T, rules []shed.Rule, opts ...shed.Option) *shed.Controller {
	t.Helper()
	c, err := shed.New(rules, append([]shed.Option{quiet()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustServer(t *testing.T, c *shed.Controller, opts ...Option) *Server {
	t.Helper()
	s, err := NewServer(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func check(ctx context.Context, c healthpb.HealthClient, opts ...grpc.CallOption) error {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	return err
}

var _ = fmt.Sprint

func mustResolver(t *testing.T, trusted string) *fingerprint.Resolver {
	t.Helper()
	r, err := fingerprint.NewResolver(fingerprint.WithTrustedProxies(netip.MustParsePrefix(trusted)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
