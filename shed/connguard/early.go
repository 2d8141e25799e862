package connguard

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// WaitShedder decides, before a request is read, whether it is shed for
// how long it waited, and counts it then: what WithEarlyAnswer asks of the
// Guard's Signal. *shed.Controller is one (Controller.ShedWaited). It must
// be safe for concurrent use.
type WaitShedder interface {
	ShedWaited(queued time.Duration) (retryAfter time.Duration, shed bool)
}

// WithEarlyAnswer has the Guard answer, in place of the server, an
// HTTP/1.1 request that its Signal sheds for its wait (WaitShedder: the
// Signal must be one, or New returns an error), before net/http reads it:
// with the 503 the middleware would write (its problem document and
// Retry-After), on the same kept-alive connection. See the package doc,
// Answering early.
func WithEarlyAnswer() Option {
	return optionFunc(func(c *config) error {
		c.earlyAnswer = true
		return nil
	})
}

// netHTTPBuffer is the size of the buffer net/http reads a connection
// into: a Read of exactly that many bytes between requests is its read of
// a request's first bytes with nothing of the request buffered.
const netHTTPBuffer = 4096

// earlyWriteTimeout bounds the write of an early answer: it goes into an
// empty socket buffer unless the client stopped reading.
const earlyWriteTimeout = 5 * time.Second

// earlyAnswers are the pre-written answers of WithEarlyAnswer, with a
// Retry-After of one second: to GET and the like, and to HEAD.
type earlyAnswers struct {
	get, head []byte
	// status is the status line, fields the header fields but
	// Retry-After, each line whole, and body the problem document: for
	// the answers of another Retry-After.
	status, fields, body []byte
}

// newEarlyAnswers writes the answers: shed.Decision.WriteRejection's
// fields and document for a request shed by an Adaptive rule.
func newEarlyAnswers() earlyAnswers {
	w := &bufferWriter{h: http.Header{}}
	shed.Decision{Kind: shed.Shedding}.WriteRejection(w)
	var a earlyAnswers
	a.status = fmt.Appendf(nil, "HTTP/1.1 %d %s\r\n", w.code, http.StatusText(w.code))
	names := make([]string, 0, len(w.h))
	for k := range w.h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range w.h[k] {
			a.fields = append(append(append(append(a.fields, k...), ": "...), v...), "\r\n"...)
		}
	}
	a.fields = append(append(append(a.fields, "Content-Length: "...), strconv.Itoa(len(w.body))...), "\r\n"...)
	a.body = w.body
	a.get, a.head = a.answer(1, false), a.answer(1, true)
	return a
}

// answer returns the answer with a Retry-After of secs, without the
// document for a HEAD request.
func (a *earlyAnswers) answer(secs int64, head bool) []byte {
	b := append(append([]byte(nil), a.status...), a.fields...)
	b = append(append(append(b, "Retry-After: "...), strconv.FormatInt(secs, 10)...), "\r\n\r\n"...)
	if !head {
		b = append(b, a.body...)
	}
	return b
}

// bufferWriter is the http.ResponseWriter newEarlyAnswers writes to.
type bufferWriter struct {
	h    http.Header
	code int
	body []byte
}

func (w *bufferWriter) Header() http.Header    { return w.h }
func (w *bufferWriter) WriteHeader(status int) { w.code = status }
func (w *bufferWriter) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return len(b), nil
}

// readEarly is Read for a connection of a Guard that answers early, when
// the server reads it between requests with nothing buffered (see
// conn.Read): it answers each whole bodiless request the bytes hold, from
// the first, while the Signal sheds it for its wait, and gives the server
// the rest; when it answered every request read, it reads again.
func (c *conn) readEarly(p []byte) (int, error) {
	g := c.g
	for {
		n, err := c.arr.read(p)
		if err != nil || n == 0 {
			return n, err
		}
		at, off := c.arr.lastArrival(), 0
		for at != 0 {
			m, head, v := readHead(p[off:n])
			if v == headForeign {
				c.early.Store(false) // TLS or HTTP/2: never HTTP/1.1 here
			}
			if v != headBodiless {
				break
			}
			ra, shed := g.waits.ShedWaited(time.Duration(time.Now().UnixNano() - at))
			if !shed {
				break
			}
			// Before the write, so that a client that read the answer sees
			// both: counted, and between requests as net/http leaves a
			// connection after its own answer, idle (the bound can make
			// room by closing it; left new, it never could).
			g.ctr.early.Add(1)
			c.finished()
			c.state.CompareAndSwap(stateNew, stateIdle)
			if err := c.answer(ra, head); err != nil {
				g.ctr.writeErrors.Add(1)
				return 0, err
			}
			off += m
		}
		if off < n {
			return copy(p, p[off:n]), nil
		}
		// Every request read was answered: the next one gets the read
		// deadline the server gave this one (its idle or header timeout).
		if d := c.readFor.Load(); d > 0 {
			if err := c.Conn.SetReadDeadline(time.Now().Add(time.Duration(d))); err != nil {
				return 0, err
			}
		}
	}
}

// answer writes the early answer with a Retry-After of ra (whole seconds,
// rounded up) under a write deadline of its own, which it clears after:
// the server sets its own (WriteTimeout) as it reads a request.
func (c *conn) answer(ra time.Duration, head bool) error {
	a := &c.g.answers
	b := a.get
	switch secs := int64((ra + time.Second - 1) / time.Second); {
	case secs > 1:
		b = a.answer(secs, head)
	case head:
		b = a.head
	}
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.g.earlyWrite)); err != nil {
		return err
	}
	if _, err := c.Conn.Write(b); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(time.Time{})
}

// between reports whether the server reads c between requests: the
// Guard's ConnState has seen c (so that its state is known), and c is new
// or idle.
func (c *conn) between() bool {
	s := c.state.Load()
	return c.tracked.Load() && (s == stateNew || s == stateIdle)
}

// SetDeadline sets c's deadlines, remembering how far the read deadline
// is when the server sets it between requests (see readEarly).
func (c *conn) SetDeadline(t time.Time) error {
	c.noteReadDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets c's read deadline, remembering how far it is when
// the server sets it between requests (see readEarly).
func (c *conn) SetReadDeadline(t time.Time) error {
	c.noteReadDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) noteReadDeadline(t time.Time) {
	// Only the deadlines the server sets between requests (its idle and
	// header timeouts) are the next request's; the others (a handler's,
	// the background read's) are left unread, and so is the clock.
	if c.g.waits == nil || !c.between() {
		return
	}
	var d time.Duration
	if !t.IsZero() {
		d = max(0, time.Until(t))
	}
	c.readFor.Store(int64(d))
}

// errNoWaitShedder is New's error for WithEarlyAnswer on a Signal that
// cannot decide by the wait.
var errNoWaitShedder = errors.New("connguard: WithEarlyAnswer needs a Signal that is a WaitShedder (a *shed.Controller)")
