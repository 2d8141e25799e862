package grpcshed

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/shed"
)

// Server protects a gRPC server with a shed.Controller: its Unary and
// Stream methods are server interceptors. It decides every call on the
// Controller (shed.Controller.Decide, on the Controller's clock), runs the
// handler when the call is admitted and rejects it with Rejection's status
// and trailer when not.
//
// A Server is safe for concurrent use and starts no goroutine. The zero
// value is not usable; call NewServer.
type Server struct {
	c       *shed.Controller
	cfg     config
	panics  atomic.Uint64
	unknown atomic.Uint64
}

// NewServer returns a Server deciding on c. It returns an error starting
// with "grpcshed: " for a nil c or an invalid option.
func NewServer(c *shed.Controller, opts ...Option) (*Server, error) {
	if c == nil {
		return nil, errors.New("grpcshed: nil Controller")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Server{c: c, cfg: cfg}, nil
}

// ServerStats are a Server's counters; they only grow.
type ServerStats struct {
	// Panics counts handlers that did not return (a panic, or
	// runtime.Goexit): their permits were given back.
	Panics uint64
	// UnknownPeers counts calls whose peer address was missing or not an
	// IP address (a bufconn or Unix socket peer): per-IP rules count them
	// all as one client, ip:unknown.
	UnknownPeers uint64
}

// Stats returns the Server's counters. Safe for concurrent use.
func (s *Server) Stats() ServerStats {
	return ServerStats{Panics: s.panics.Load(), UnknownPeers: s.unknown.Load()}
}

// Unary is a grpc.UnaryServerInterceptor: it decides the call, and runs
// handler when admitted, holding the call's permits until handler returns
// and reporting Outcome of what it returned. It blocks as long as a rule's
// queue keeps the call waiting (MaxWait, and the call's deadline).
func (s *Server) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	tok, trailer, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		if trailer != nil {
			_ = grpc.SetTrailer(ctx, trailer)
		}
		return nil, err
	}
	var (
		resp     any
		returned bool
	)
	defer s.finish(ctx, tok, &returned, &err)
	resp, err = handler(ctx, req)
	returned = true
	return resp, err
}

// Stream is a grpc.StreamServerInterceptor: it decides the call when the
// stream opens, and runs handler when admitted, holding the call's permits
// for the life of the stream, until handler returns (a handler that
// returns when its context ends gives them back when the client goes
// away), and reporting Outcome of what it returned.
func (s *Server) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	tok, trailer, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		if trailer != nil {
			ss.SetTrailer(trailer)
		}
		return err
	}
	returned := false
	defer s.finish(ctx, tok, &returned, &err)
	err = handler(srv, ss)
	returned = true
	return err
}

// admit decides the call of fullMethod; on a rejection it returns the
// rejection's error and trailer.
func (s *Server) admit(ctx context.Context, fullMethod string) (shed.Token, metadata.MD, error) {
	at, known := s.cfg.attempt(ctx, fullMethod, mdSource{ctx: ctx})
	if !known {
		s.unknown.Add(1)
	}
	d, tok, err := s.c.Decide(ctx, at)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return shed.Token{}, nil, status.FromContextError(cerr).Err() // nobody reads it
		}
		// A broken decision (a negative cost, a bad clock): no admission.
		d = shed.Decision{Kind: shed.Shedding, RetryAfter: shedHint}
	}
	if d.Allowed {
		return tok, nil, nil
	}
	st, trailer := Rejection(d)
	return shed.Token{}, trailer, st.Err()
}

// finish ends an admitted call: with Outcome of *err when the handler
// returned, else (a panic, runtime.Goexit) with Ignore, counted, before the
// panic goes on.
func (s *Server) finish(ctx context.Context, tok shed.Token, returned *bool, err *error) {
	if *returned {
		tok.Done(Outcome(ctx, *err))
		return
	}
	p := recover() // nil for Goexit, which recover does not stop
	tok.Done(shed.Ignore)
	s.panics.Add(1)
	if p != nil {
		panic(p)
	}
}
