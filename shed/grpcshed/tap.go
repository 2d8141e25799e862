package grpcshed

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/shed"
)

// Tap rejects calls before gRPC accepts their stream: its Handle is a
// tap.ServerInHandle (grpc.InTapHandle(t.Handle)), so a flood is turned
// away without a goroutine, a stream or a decoded message per call.
//
// gRPC runs the handle on the connection's reading goroutine, before the
// stream exists, and tells nobody when the call ends. So a Tap decides the
// call on its Controller and, when it is admitted, gives back what it took
// at once (Token.Done with Ignore): rate rules (a call opened is a call
// counted) and the penalty box work there; a concurrency or adaptive rule
// would be taken and returned at once and limits nothing; a rule with a
// MaxWait, or a store that blocks, would stall every call of the
// connection. Give a Tap a Controller of its own, of rate rules over IP,
// API key or tenant (the early, cheap front), and keep concurrency and
// adaptive limits on the Server's, whose permits live as long as the call.
// A Controller shared by a Tap and a Server would charge a call's rate
// rules twice.
//
// A rejection is Rejection's status, whose RetryInfo detail reaches the
// client; the grpc-retry-pushback-ms trailer does not (gRPC writes an
// early rejection's status alone), so a gRPC client's own retry policy
// backs off as it would for any failure, while a Client from this package
// reads the RetryInfo.
//
// A Tap is safe for concurrent use and starts no goroutine. The zero value
// is not usable; call NewTap.
type Tap struct {
	c       *shed.Controller
	cfg     config
	unknown atomic.Uint64
}

// NewTap returns a Tap deciding on c, which should hold rate rules only
// (see Tap). It returns an error starting with "grpcshed: " for a nil c or
// an invalid option.
func NewTap(c *shed.Controller, opts ...Option) (*Tap, error) {
	if c == nil {
		return nil, errors.New("grpcshed: nil Controller")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Tap{c: c, cfg: cfg}, nil
}

// UnknownPeers counts the calls whose peer address was missing or not an
// IP address (see ServerStats). Safe for concurrent use.
func (t *Tap) UnknownPeers() uint64 { return t.unknown.Load() }

// Handle decides the call info names: it returns ctx when the call is
// admitted (holding nothing) and the rejection's status error when not.
// A decision that fails for ctx (the call's deadline passed) is that
// context error's status; one that fails otherwise is Unavailable.
func (t *Tap) Handle(ctx context.Context, info *tap.Info) (context.Context, error) {
	at, known := t.cfg.attempt(ctx, info.FullMethodName, mdSource{ctx: ctx, md: info.Header})
	if !known {
		t.unknown.Add(1)
	}
	d, tok, err := t.c.Decide(ctx, at)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return ctx, status.FromContextError(cerr).Err()
		}
		d = shed.Decision{Kind: shed.Shedding, RetryAfter: shedHint}
	}
	if d.Allowed {
		tok.Done(shed.Ignore)
		return ctx, nil
	}
	st, _ := Rejection(d)
	return ctx, st.Err()
}
