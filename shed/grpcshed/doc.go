// Package grpcshed puts a shed.Controller in front of a gRPC server and
// makes a gRPC client a good citizen of the servers that shed it. It is
// its own package so that a service that speaks only net/http never
// compiles google.golang.org/grpc.
//
// # Server
//
// NewServer returns a Server whose Unary and Stream methods are server
// interceptors (grpc.ChainUnaryInterceptor(s.Unary),
// grpc.ChainStreamInterceptor(s.Stream)). For every call they build a
// shed.Attempt: the client address from the peer (peer.FromContext, through
// a fingerprint.Resolver, which with WithResolver may trust the forwarding
// metadata of proxies), the user, API key, tenant and tier from request
// metadata (WithMetadataKeys) or from the caller (WithClient), the
// category from the full method name (WithCategory; by default the full
// method, "/package.Service/Method", so a rule names one method) and the
// cost (WithCost). The request's deadline (grpc-timeout) is the context's,
// and reaches the Controller's deadline-aware admission as it is.
//
// A rejection is the status codes.ResourceExhausted for a client over its
// limit or penalized, and codes.Unavailable when the server sheds load,
// with a google.rpc.RetryInfo detail and the grpc-retry-pushback-ms
// trailer (gRFC A6) saying when to come back; a rejection that will never
// be admitted (a cost above the limit) carries no RetryInfo and a pushback
// of -1, which tells a gRPC client not to retry.
//
// An admitted call holds its permits until its handler returns, then
// reports its outcome from the status the handler returned (see Outcome).
// Permits come back on every path: a handler that panics or calls
// runtime.Goexit gives them back before the panic goes on.
//
// NewTap returns a Tap, whose Handle is a tap.ServerInHandle
// (grpc.InTapHandle): it rejects a call before its stream is accepted. It
// runs on the connection's reading goroutine and has no place to give a
// permit back when the call ends, so it is for rate rules only, on a
// Controller of its own (see Tap).
//
// # Client
//
// NewClient returns a Client whose Unary and Stream methods are client
// interceptors: after a rejection that says when to come back (RetryInfo,
// or grpc-retry-pushback-ms), every call to that target waits until then,
// never less; a rejected unary call is retried once the server allows it,
// within a retry budget; with WithPace the calls to each target are spaced
// at a rate of the caller's choosing (see Client).
package grpcshed
