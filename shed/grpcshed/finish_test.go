package grpcshed

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/shed"
)

// fakeStream is the server side of a stream, for calling Stream directly.
type fakeStream struct {
	grpc.ServerStream
	ctx     context.Context
	trailer metadata.MD
}

func (s *fakeStream) Context() context.Context  { return s.ctx }
func (s *fakeStream) SetTrailer(md metadata.MD) { s.trailer = metadata.Join(s.trailer, md) }

func peerCtx() context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}})
}

func TestPanicInHandlerReturnsPermitsAndGoesOn(t *testing.T) {
	c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
	s := mustServer(t, c)
	calls := map[string]func(){
		"unary": func() {
			_, _ = s.Unary(peerCtx(), nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
				func(context.Context, any) (any, error) { panic("boom") })
		},
		"stream": func() {
			_ = s.Stream(nil, &fakeStream{ctx: peerCtx()}, &grpc.StreamServerInfo{FullMethod: watchMethod},
				func(any, grpc.ServerStream) error { panic("boom") })
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			before := s.Stats().Panics
			func() {
				defer func() {
					if p := recover(); p != "boom" {
						t.Fatalf("recovered %v, want the handler's panic to go on", p)
					}
				}()
				call()
			}()
			if n := c.Stats().Inflight; n != 0 {
				t.Fatalf("inflight %d after a panic, want 0", n)
			}
			if got := s.Stats().Panics - before; got != 1 {
				t.Fatalf("panics counted %d, want 1", got)
			}
		})
	}
}

func TestGoexitInHandlerReturnsPermits(t *testing.T) {
	c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
	s := mustServer(t, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Unary(peerCtx(), nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
			func(context.Context, any) (any, error) { runtime.Goexit(); return nil, nil })
	}()
	<-done
	if n := c.Stats().Inflight; n != 0 {
		t.Fatalf("inflight %d after Goexit, want 0", n)
	}
	if n := s.Stats().Panics; n != 1 {
		t.Fatalf("panics counted %d, want 1", n)
	}
}

func TestStreamRejectionSetsTrailer(t *testing.T) {
	c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
	s := mustServer(t, c, WithCost(func(string) int64 { return 2 }))
	ss := &fakeStream{ctx: peerCtx()}
	err := s.Stream(nil, ss, &grpc.StreamServerInfo{FullMethod: watchMethod},
		func(any, grpc.ServerStream) error { t.Fatal("handler ran"); return nil })
	if status.Code(err) != codes.Unavailable || len(ss.trailer.Get(PushbackKey)) != 1 {
		t.Fatalf("%v, trailer %v: want Unavailable with a pushback", err, ss.trailer)
	}
}

func TestUnknownPeerIsCounted(t *testing.T) {
	c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
	s := mustServer(t, c)
	_, err := s.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
		func(context.Context, any) (any, error) { return nil, nil })
	if err != nil || s.Stats().UnknownPeers != 1 {
		t.Fatalf("%v, unknown peers %d: want admitted and counted", err, s.Stats().UnknownPeers)
	}
}

func TestOutcomeOfStatus(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, cancel2 := context.WithTimeout(live, 0)
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want shed.Outcome
	}{
		{"ok", live, nil, shed.Success},
		{"not found", live, status.Error(codes.NotFound, "x"), shed.Success},
		{"internal", live, status.Error(codes.Internal, "x"), shed.Success},
		{"plain error", live, errors.New("x"), shed.Success},
		{"unavailable", live, status.Error(codes.Unavailable, "x"), shed.Dropped},
		{"resource exhausted", live, status.Error(codes.ResourceExhausted, "x"), shed.Dropped},
		{"deadline status", live, status.Error(codes.DeadlineExceeded, "x"), shed.Dropped},
		{"deadline error", live, context.DeadlineExceeded, shed.Dropped},
		{"canceled status", live, status.Error(codes.Canceled, "x"), shed.Ignore},
		{"canceled error", live, context.Canceled, shed.Ignore},
		{"ok but client gone", gone, nil, shed.Ignore},
		{"ok but past deadline", late, nil, shed.Dropped},
	} {
		if got := Outcome(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: Outcome %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	c := mustController(t, []shed.Rule{{Name: "cap", Algorithm: shed.Concurrency, Limit: 1}})
	for name, opts := range map[string][]Option{
		"nil option":     {nil},
		"nil resolver":   {WithResolver(nil)},
		"no keys":        {WithMetadataKeys(MetadataKeys{})},
		"uppercase key":  {WithMetadataKeys(MetadataKeys{APIKey: "X-Api-Key"})},
		"key with space": {WithMetadataKeys(MetadataKeys{User: "x user"})},
		"nil client":     {WithClient(nil)},
		"nil category":   {WithCategory(nil)},
		"nil cost":       {WithCost(nil)},
	} {
		if _, err := NewServer(c, opts...); err == nil {
			t.Errorf("%s: NewServer accepted it", name)
		}
		if _, err := NewTap(c, opts...); err == nil {
			t.Errorf("%s: NewTap accepted it", name)
		}
	}
	if _, err := NewServer(nil); err == nil {
		t.Error("NewServer(nil) accepted")
	}
	if _, err := NewTap(nil); err == nil {
		t.Error("NewTap(nil) accepted")
	}
}
