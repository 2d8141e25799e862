package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/connguard"
	"github.com/zeromicro/go-zero/core/load"
)

// contenderNames lists every protection the benchmark compares, in the
// order of the table.
var contenderNames = []string{"none", "static", "gozero", "aegisbbr", "failsafe", "gradient2", "vegas", "aimd", "sluice", guardName, earlyName, pauseName, pauseIdleName, pauseAllName, pauseConnName, pauseCloseName}

// defaultContenders are those of the default run: the references, the
// peers, sluice's Default through the middleware alone and behind the
// connection guard with its arrival times and early answers (sluice's
// other algorithms, the guard without early answers and its pacing
// variants through -contenders). Seven, so that the run stays under ten
// minutes.
var defaultContenders = []string{"none", "static", "gozero", "aegisbbr", "failsafe", "sluice", earlyName}

// rejectName is the protection of the rejection-cost run: sluice's
// middleware with an adaptive rule whose only permit is held, so every
// request is shed by the same path an overloaded Default sheds by.
const rejectName = "sluice-full"

// refuseName is the protection of the rejection-cost run that refuses at
// accept: the guard contender with a Signal that sheds every connection,
// so that each is answered by the Guard's 503 and none reaches net/http.
const refuseName = "guard-refuse"

// earlyRejectName is the protection of the rejection-cost run that
// answers early: the early contender whose Default has a queue bound of
// 2ns, so that the Guard answers every request (whose arrival is known)
// before net/http reads it.
const earlyRejectName = "early-all"

// pauseRefuseName is the protection of the rejection-cost run that does
// not accept: the pause contender with a Signal that sheds every
// connection, so that its listener accepts none and the kernel holds or
// drops them all.
const pauseRefuseName = "pause-refuse"

// shedAll is a connguard.Signal that sheds every connection.
type shedAll struct{}

func (shedAll) Shedding() float64 { return 1 }

// guardName is sluice's Default middleware with a connguard.Guard on the
// server's listener, ConnState and ConnContext: refusals at accept while
// the Default rule sheds, a bound on the connections held, and each
// request's arrival time, so that Default sheds those that waited past
// its queue bound.
const guardName = "sluice-guard"

// earlyName is guardName whose Guard answers the HTTP/1.1 requests that
// Default sheds for their wait before net/http reads them
// (connguard.WithEarlyAnswer).
const earlyName = "sluice-early"

// pauseName is the guard contender whose listener pauses instead of
// refusing: while the Default rule sheds a share f, it does not accept for
// f of every pausePeriod, and its kernel accept queue is pauseBacklog
// long, so that the kernel drops the surplus SYNs.
const pauseName = "sluice-pause"

// pauseIdleName is pauseName that also closes the shed share of its
// connections as they go idle (connguard.WithIdleShed), so that kept-alive
// clients dial into the paused accept instead of reaching the middleware.
const pauseIdleName = "sluice-pause-idle"

// pauseAllName is pauseName all or nothing: its listener accepts nothing
// while the Default rule sheds any share (the Signal rounded up to 1).
const pauseAllName = "sluice-pause-all"

// pauseConnName is pauseIdleName with the shed share applied to
// connections only: every request is CriticalPlus to the middleware
// (shed.WithClient), which Default's share shedding never sheds, so that
// the share is not shed twice (once by the pacing, once more of what the
// pacing let in); the middleware still answers 503 at the limit.
const pauseConnName = "sluice-pause-conn"

// pauseCloseName is pauseName whose middleware answers a rejection with
// Connection: close while the rule sheds (shed.WithRejection), so that the
// rejected client dials its next request into the paused listener instead
// of sending it on the kept-alive connection.
const pauseCloseName = "sluice-pause-close"

// pausePeriod and pauseBacklog are the pause contenders' pacing period and
// accept queue. Each open part starts by accepting the queue (up to
// pauseBacklog+1 connections), so that however much is shed the listener
// takes about (pauseBacklog+1)/pausePeriod connections a second (450):
// half the CPU endpoint's capacity on a quiet machine (~900 req/s). What
// waits in the queue is at most a period old.
const (
	pausePeriod  = 20 * time.Millisecond
	pauseBacklog = 8
)

// anyShed is a connguard.Signal that sheds everything while sig sheds any
// share.
type anyShed struct{ sig connguard.Signal }

func (a anyShed) Shedding() float64 {
	if a.sig.Shedding() > 0 {
		return 1
	}
	return 0
}

// DefaultGuardConns is the guard contender's connection bound unless
// -guard-conns says otherwise, sized as connguard's doc says: for the
// arrival rate to answer (shed or not) times how long a request holds its
// connection. At 10x on one core (about 8,700 requests a second, each
// held up to Default's queue bound, 20 ms at the onset of the overload and
// 2.5 ms once it stands, and longer in a dial storm) a bound
// of 1000 was reached in two rounds of nine, whose refusals and idle
// evictions cut their goodput to 0.03 and 0.56; at 4000 at most 878
// connections were open in six.
const DefaultGuardConns = 4000

// protectionConfig is what a contender is built from.
type protectionConfig struct {
	// static is the oracle's limit (the known capacity in requests at once).
	static int
	// proto is the server's HTTP version ("1" or "h2c"): the guard answers
	// an HTTP/1.1 client with a 503 and closes an HTTP/2 one without a word.
	proto string
	// guardConns is the guard's connection bound (0: DefaultGuardConns).
	guardConns int
}

// protection is one contender in front of the endpoint.
type protection struct {
	wrap func(http.Handler) http.Handler
	// listen wraps the server's listener and connState is called from the
	// server's ConnState; both nil for a contender that works in the
	// handler only.
	listen    func(net.Listener) net.Listener
	connState func(net.Conn, http.ConnState)
	// connContext is the server's ConnContext; nil for none.
	connContext func(context.Context, net.Conn) context.Context
	// guard is the guard contender's Guard, for its counters; nil otherwise.
	guard *connguard.Guard
	// limit reads the contender's current limit; nil when it has none.
	limit func() int
	close func() error
	// ctl is sluice's controller, for the sluice contenders only.
	ctl *shed.Controller
}

func shed503(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
}

// newProtection builds the contender called name from pc.
func newProtection(name string, pc protectionConfig) (*protection, error) {
	static := pc.static
	nop := func() error { return nil }
	switch name {
	case "none":
		return &protection{wrap: func(h http.Handler) http.Handler { return h }, close: nop}, nil
	case "static":
		if static < 1 {
			return nil, fmt.Errorf("overload: static limit %d is not positive", static)
		}
		var inflight atomic.Int64
		return &protection{
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					// Add first, undo when over: never admits more than static.
					if inflight.Add(1) > int64(static) {
						inflight.Add(-1)
						shed503(w)
						return
					}
					defer inflight.Add(-1)
					next.ServeHTTP(w, r)
				})
			},
			limit: func() int { return static },
			close: nop,
		}, nil
	case "gozero":
		load.DisableLog()
		s := load.NewAdaptiveShedder()
		return &protection{
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					p, err := s.Allow()
					if err != nil {
						shed503(w)
						return
					}
					defer p.Pass()
					next.ServeHTTP(w, r)
				})
			},
			close: nop,
		}, nil
	case "aegisbbr":
		l := bbr.NewLimiter()
		return &protection{
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					done, err := l.Allow()
					if err != nil {
						shed503(w)
						return
					}
					defer done(ratelimit.DoneInfo{})
					next.ServeHTTP(w, r)
				})
			},
			// MaxInFlight is the inflight BBR admits once its CPU gate is shut.
			limit: func() int { return int(l.Stat().MaxInFlight) },
			close: nop,
		}, nil
	case "failsafe":
		l := adaptivelimiter.NewBuilder[any]().Build()
		return &protection{
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					p, ok := l.TryAcquirePermit()
					if !ok {
						shed503(w)
						return
					}
					defer p.Record()
					next.ServeHTTP(w, r)
				})
			},
			limit: l.Limit,
			close: nop,
		}, nil
	case "gradient2":
		alg, err := adaptive.NewGradient2()
		if err != nil {
			return nil, err
		}
		return sluiceProtection(alg)
	case "vegas":
		alg, err := adaptive.NewVegas()
		if err != nil {
			return nil, err
		}
		return sluiceProtection(alg)
	case "aimd":
		alg, err := adaptive.NewAIMD()
		if err != nil {
			return nil, err
		}
		return sluiceProtection(alg)
	case "sluice":
		alg, err := adaptive.NewDefault()
		if err != nil {
			return nil, err
		}
		return sluiceProtection(alg)
	case guardName:
		return guardProtection(pc, guardSpec{})
	case earlyName:
		return guardProtection(pc, guardSpec{guard: []connguard.Option{connguard.WithEarlyAnswer()}})
	case earlyRejectName:
		return guardProtection(pc, guardSpec{guard: []connguard.Option{connguard.WithEarlyAnswer()},
			adaptive: []adaptive.Option{adaptive.WithSchedulingTarget(time.Nanosecond)}})
	case refuseName:
		return guardProtection(pc, guardSpec{signal: func(connguard.Signal) connguard.Signal { return shedAll{} }})
	case pauseName:
		return guardProtection(pc, guardSpec{guard: pauseOptions()})
	case pauseRefuseName:
		return guardProtection(pc, guardSpec{guard: pauseOptions(), signal: func(connguard.Signal) connguard.Signal { return shedAll{} }})
	case pauseIdleName:
		return guardProtection(pc, guardSpec{guard: append(pauseOptions(), connguard.WithIdleShed())})
	case pauseConnName:
		return guardProtection(pc, guardSpec{guard: append(pauseOptions(), connguard.WithIdleShed()),
			shed: []shed.Option{shed.WithClient(func(*http.Request) shed.Client { return shed.Client{Priority: shed.CriticalPlus} })}})
	case pauseCloseName:
		return guardProtection(pc, guardSpec{guard: pauseOptions(), closeWhileShedding: true})
	case pauseAllName:
		return guardProtection(pc, guardSpec{guard: pauseOptions(),
			signal: func(s connguard.Signal) connguard.Signal { return anyShed{s} }})
	case rejectName:
		alg, err := adaptive.NewDefault(adaptive.WithLimits(1, 1), adaptive.WithInitialLimit(1))
		if err != nil {
			return nil, err
		}
		p, err := sluiceProtection(alg)
		if err != nil {
			return nil, err
		}
		return p, p.holdOne()
	}
	if p, ok, err := admitProtection(name); ok {
		return p, err
	}
	return nil, fmt.Errorf("overload: unknown contender %q", name)
}

// sluiceProtection is alg in a shed.Adaptive rule with no options, applied
// through shed.Controller.Middleware, as a user would write it; opts are
// the Controller's (none but for a guard contender's).
func sluiceProtection(alg adaptive.Algorithm, opts ...shed.Option) (*protection, error) {
	l, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, err
	}
	c, err := shed.New([]shed.Rule{{Name: "endpoint", Algorithm: shed.Adaptive, Limiter: l}}, opts...)
	if err != nil {
		return nil, err
	}
	return &protection{wrap: c.Middleware, limit: l.Limit, close: c.Close, ctl: c}, nil
}

// pauseOptions are the Guard options of the pause contenders.
func pauseOptions() []connguard.Option {
	return []connguard.Option{connguard.WithPause(pausePeriod), connguard.WithBacklog(pauseBacklog)}
}

// guardSpec is what a guard contender adds to sluice's Default: the
// Guard's options, the Controller's options, and what the Guard's Signal
// is made of the Controller (nil: the Controller itself).
type guardSpec struct {
	guard    []connguard.Option
	shed     []shed.Option
	adaptive []adaptive.Option // Default's
	signal   func(connguard.Signal) connguard.Signal
	// closeWhileShedding answers the middleware's rejections with
	// Connection: close while the Controller sheds a share.
	closeWhileShedding bool
}

// guardProtection is sluice's Default behind a connguard.Guard as spec
// says, wired as the package doc says.
func guardProtection(pc protectionConfig, spec guardSpec) (*protection, error) {
	alg, err := adaptive.NewDefault(spec.adaptive...)
	if err != nil {
		return nil, err
	}
	var ctl *shed.Controller // set below: the rejection reads its share
	if spec.closeWhileShedding {
		spec.shed = append(spec.shed, shed.WithRejection(func(w http.ResponseWriter, _ *http.Request, d shed.Decision) {
			if ctl.Shedding() > 0 {
				w.Header().Set("Connection", "close")
			}
			d.WriteRejection(w)
		}))
	}
	p, err := sluiceProtection(alg, spec.shed...)
	if err != nil {
		return nil, err
	}
	ctl = p.ctl
	conns := pc.guardConns
	if conns == 0 {
		conns = DefaultGuardConns
	}
	refusal := connguard.Respond
	if pc.proto == "h2c" {
		refusal = connguard.Close // an HTTP/2 client cannot read an HTTP/1.1 503
	}
	var s connguard.Signal = p.ctl
	if spec.signal != nil {
		s = spec.signal(s)
	}
	g, err := connguard.New(s, conns, append(spec.guard, connguard.WithRefusal(refusal))...)
	if err != nil {
		p.close()
		return nil, err
	}
	p.listen, p.connState, p.connContext, p.guard = g.Listener, g.ConnState, g.ConnContext, g
	return p, nil
}

// holdOne takes one permit of the sluice rule and never gives it back, so
// that a limit of one rejects every request.
func (p *protection) holdOne() error {
	d, _, err := p.ctl.Decide(context.Background(), shed.Attempt{})
	if err != nil {
		return err
	}
	if !d.Allowed {
		return fmt.Errorf("overload: the first attempt of %s was rejected", rejectName)
	}
	return nil
}
