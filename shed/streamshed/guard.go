package streamshed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

const (
	// DefaultCategory is the category of the attempts a Guard decides
	// when WithCategory does not name one.
	DefaultCategory = "connect"
	// DefaultMessageBurst is how many messages a connection may send at
	// once when WithMessageLimit does not say.
	DefaultMessageBurst = 50
	// DefaultMessagesPerSecond is the rate at which a connection's message
	// bucket refills when WithMessageLimit does not say.
	DefaultMessagesPerSecond = 10
)

// WebSocket close codes (RFC 6455, section 7.4.1) the Guard closes with.
const (
	// GoingAway (1001): the Guard ended the connection because its
	// context ended or it reached its maximum lifetime.
	GoingAway = 1001
	// PolicyViolation (1008): the connection sent messages faster than
	// its message limit.
	PolicyViolation = 1008
)

// maxReason is the longest close reason a WebSocket close frame carries:
// 125 bytes of payload less the 2-byte code.
const maxReason = 123

// Guard decides the opening of connections with a shed.Controller and
// limits the messages of each connection it admits. A Guard's settings are
// immutable (Stats counts what it did) and it is safe for concurrent use.
// It starts no goroutine of its own: a Conn holds a context callback, and
// with WithMaxLifetime a timer, until it ends. Use NewGuard; the zero
// value is not usable.
type Guard struct {
	c        *shed.Controller
	category string
	msgs     *ratelimit.GCRA
	reason   string // the close reason of a message-rate violation
	life     time.Duration
	now      func() int64
	attempt  func(*http.Request) shed.Attempt
	ctr      counters
}

// NewGuard returns a Guard over c. It returns an error (starting with
// "streamshed: ") for a nil c and for a bad option value.
func NewGuard(c *shed.Controller, opts ...Option) (*Guard, error) {
	if c == nil {
		return nil, errors.New("streamshed: NewGuard with a nil Controller")
	}
	cfg := config{
		category: DefaultCategory,
		burst:    DefaultMessageBurst,
		rate:     ratelimit.Per(DefaultMessagesPerSecond, time.Second),
		now:      clock.Now,
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("streamshed: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	msgs, err := ratelimit.NewGCRA(cfg.rate, cfg.burst)
	if err != nil {
		return nil, fmt.Errorf("streamshed: message limit: %w", err)
	}
	g := &Guard{c: c, category: cfg.category, msgs: msgs, life: cfg.life, now: cfg.now, attempt: cfg.attempt}
	g.reason = fmt.Sprintf("message rate exceeded: %d at once, %v", cfg.burst, cfg.rate)
	if len(g.reason) > maxReason {
		g.reason = "message rate exceeded"
	}
	if g.attempt == nil {
		res, err := fingerprint.NewResolver() // the TCP peer, no proxy trusted
		if err != nil {
			return nil, fmt.Errorf("streamshed: %w", err)
		}
		g.attempt = func(r *http.Request) shed.Attempt {
			ip := res.ClientIP(r)
			return shed.Attempt{IP: ip.Group.Addr(), CGNAT: ip.CGNAT}
		}
	}
	return g, nil
}

// Open decides the opening of a connection for a, in the Guard's category
// (which replaces a.Category), at a.Now (the Controller's clock when
// zero). When the decision is allowed it returns the Conn, which holds the
// decision's Token until the connection ends (see Conn); otherwise the
// Conn is nil.
// When ctx ends before the Conn does, the Conn ends: it closes the
// connection with GoingAway (once a CloseFunc is bound) and gives its
// Token back.
//
// Open returns Decide's error, with a nil Conn: a bad attempt, or ctx's
// error when ctx ended before the decision. Safe for concurrent use; it
// blocks as long as the Controller's store takes to decide.
func (g *Guard) Open(ctx context.Context, a shed.Attempt) (*Conn, shed.Decision, error) {
	a.Category = g.category
	d, tok, err := g.c.Decide(ctx, a)
	if err != nil || !d.Allowed {
		return nil, d, err
	}
	g.ctr.opened.Add(1)
	c := &Conn{g: g, tok: tok}
	c.mu.Lock() // the callbacks may run at once; end reads these under mu
	defer c.mu.Unlock()
	c.stopCtx = context.AfterFunc(ctx, func() {
		if c.end(GoingAway, "server context ended") {
			g.ctr.ctxEnded.Add(1)
		}
	})
	if g.life > 0 {
		c.timer = time.AfterFunc(g.life, func() {
			if c.end(GoingAway, "connection lifetime reached") {
				g.ctr.lifeEnded.Add(1)
			}
		})
	}
	return c, d, nil
}
