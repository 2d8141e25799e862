package streamshed

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

var (
	// ErrPolicyViolation is what Message returns when the message it
	// counts is over the connection's message limit: the connection has
	// been closed with PolicyViolation.
	ErrPolicyViolation = errors.New("streamshed: message rate exceeded")
	// ErrEnded is what Message returns once the connection has ended.
	ErrEnded = errors.New("streamshed: connection ended")
)

// CloseFunc closes a connection with a WebSocket close code and a reason
// (at most 123 bytes; the Guard's are shorter). It must be safe to call
// from any goroutine while another reads the connection (coder/websocket's
// Conn.Close and gorilla/websocket's WriteControl are). A stream without
// close codes (a raw net.Conn, an event stream) ignores them and closes.
type CloseFunc func(code int, reason string) error

// Conn is one admitted connection: it holds the decision's Token and the
// connection's message bucket. It ends exactly once, at the first of Done,
// a message over the limit, the end of Open's context and the maximum
// lifetime (WithMaxLifetime), and then gives the Token back (reporting
// shed.Ignore: a connection's lifetime says nothing about the service's
// latency). A Conn is safe for concurrent use; it must not be copied. A
// CloseFunc that panics still gives the Token back, and the panic goes on.
type Conn struct {
	g     *Guard
	tok   shed.Token
	msgs  ratelimit.GCRAState
	ended atomic.Bool // set once the Conn has ended, before its Token goes back

	mu      sync.Mutex // guards every field below
	close   CloseFunc
	over    bool // ended
	code    int  // why it ended: 0 for Done
	reason  string
	stopCtx func() bool
	timer   *time.Timer
}

// Bind gives the Conn the func that closes its connection, once the
// connection exists (after a WebSocket upgrade). When the Conn ended
// already (its context ended while the upgrade ran), Bind calls close at
// once with the code and reason it ended with. Bind again replaces the
// func; Bind(nil) removes it.
func (c *Conn) Bind(close CloseFunc) {
	c.mu.Lock()
	if !c.over {
		c.close = close
		c.mu.Unlock()
		return
	}
	code, reason := c.code, c.reason
	c.mu.Unlock()
	if code != 0 && close != nil && close(code, reason) != nil {
		c.g.ctr.closeErrors.Add(1) // the connection is going away either way
	}
}

// Message counts one message received on the connection: shorthand for
// MessageAt(now) on the Guard's clock.
func (c *Conn) Message() error { return c.MessageAt(c.g.now()) }

// MessageAt counts one message received at now (monotonic nanoseconds).
// It returns nil when the message is within the connection's limit: the
// caller handles it. When it is over the limit, MessageAt ends the Conn: it
// closes the connection with PolicyViolation and a reason saying the limit,
// gives the Token back and returns ErrPolicyViolation; the caller stops
// reading. Once the Conn has ended it returns ErrEnded. It never blocks
// except to close, takes no lock and does not allocate on the admit path.
func (c *Conn) MessageAt(now int64) error {
	if c.ended.Load() {
		return ErrEnded
	}
	if c.g.msgs.AllowN(&c.msgs, now, 1).Allowed() {
		return nil
	}
	if !c.end(PolicyViolation, c.g.reason) {
		return ErrEnded // it ended another way meanwhile
	}
	c.g.ctr.violations.Add(1)
	return ErrPolicyViolation
}

// Done ends the Conn when its connection has closed, or its handler
// returns: it gives the Token back and stops the Conn's timer and context
// callback. It does not call the CloseFunc. Done is idempotent: after the
// Conn has ended it does nothing, and so it does on a nil Conn (a refused
// Open's). When another end is closing the connection at that moment, Done
// returns at once and the Token comes back when that close returns. Defer
// Done right after Open.
func (c *Conn) Done() {
	if c != nil {
		c.end(0, "")
	}
}

// end ends the Conn with code (0: by Done, without closing) and reports
// whether this call did it.
func (c *Conn) end(code int, reason string) bool {
	c.mu.Lock()
	if c.over {
		c.mu.Unlock()
		return false
	}
	c.over, c.code, c.reason = true, code, reason
	close, stop, timer := c.close, c.stopCtx, c.timer
	c.mu.Unlock()
	c.ended.Store(true)
	if stop != nil {
		stop()
	}
	if timer != nil {
		timer.Stop()
	}
	// Close first, then give the permit back (deferred: also when close
	// panics): the client may not open another connection while this one
	// is still open.
	defer func() {
		c.tok.Done(shed.Ignore)
		c.g.ctr.ended.Add(1)
	}()
	if code != 0 && close != nil && close(code, reason) != nil {
		c.g.ctr.closeErrors.Add(1)
	}
	return true
}
