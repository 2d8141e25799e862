package shed

import (
	"bufio"
	"context"
	"net"
	"net/http"

	"github.com/sluicehq/sluice/fingerprint"
)

// Middleware returns next protected by c: for every request it finds the
// client (WithResolver: the TCP peer unless it is a trusted proxy, read
// only when a rule, an exemption or an option needs it; WithClient: user,
// API key, tenant), the category (WithCategory), asks the penalty box,
// decides the rules, waits for a concurrency permit if a rule allows it,
// then calls next, and reports the outcome when next returns: a 5xx status
// is a drop, a client that went away is ignored, anything else a success.
// Permits come back on every path; when next panics or calls
// runtime.Goexit they come back first and the panic or exit goes on. A
// request whose context has ended before its decision (the client closed
// the connection or reset the stream while the request waited) is neither
// decided nor served: it is counted in Stats.Gone and answered 503.
//
// Every response carries the rate-limit header fields (WithHeaders); a
// rejection is answered 429 (the client is over a limit, or penalized) or
// 503 (the server sheds load), with Retry-After and a problem+json body
// (WithRejection). The values of those fields may be shared with other
// responses (those that say the same figures): replace them (Header.Set)
// rather than write into their slices. The ResponseWriter that next sees
// wraps the one given; it unwraps (http.ResponseController) to reach
// Flush, Hijack and deadlines.
//
// The wrapped ResponseWriter, like any, must not be used after next
// returns: it is recycled.
func (c *Controller) Middleware(next http.Handler) http.Handler {
	// Nothing of the request but its client address and category reaches
	// the decision without a penalty box, an Observer, WithClient, WithCost
	// and WithSuspicion: the short path may decide it (see decide).
	lean := c.pen == nil && c.answer.obs == nil && c.reading.client == nil && c.reading.cost == nil && c.suspicion == nil
	return &middleware{c: c, next: next, lean: lean}
}

// gone answers r, whose context ended before its decision: its client
// closed the connection or reset the stream while the request waited in
// front of the handler (on an overloaded core, in the run queue). Work
// started for it would be thrown away, and a decision would charge its
// client's limits and give the adaptive limits a sample of nothing, so it
// gets neither; it is counted in Stats.Gone and answered as shed (nobody
// reads the answer; the status is for the server's own logs).
func (c *Controller) gone(w http.ResponseWriter, r *http.Request) {
	a := c.get() // for the counter shard: a flood of gone requests shares no word
	a.ctr[cGone].Add(1)
	c.put(a)
	c.answer.reject(w, r, Decision{Kind: Shedding, RetryAfter: shedHint, rule: -1})
}

type middleware struct {
	c    *Controller
	next http.Handler
	lean bool // the Controller's options allow the short path (see decide)
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := m.c
	// The client's address, read here when an exemption or an option
	// needs it; a lean middleware reads it in decide, and only for a rule
	// set that keys on it.
	var ip fingerprint.ClientIP
	read := !m.lean || c.reading.exempt != nil
	if read {
		ip = c.reading.res.ClientIP(r)
		if c.reading.exempt != nil && c.reading.exempt.match(ip.Addr, r.URL.EscapedPath()) {
			c.ctr.add(0, cExempt, 1) // no ticket, no shard: exempt requests are few (health checks)
			m.next.ServeHTTP(w, r)
			return
		}
	}
	ctx := r.Context()
	if ctx.Err() != nil {
		c.gone(w, r)
		return
	}
	a := c.get()
	var d Decision
	if err := m.decide(ctx, a, r, &ip, read, &d); err != nil {
		// The client went away (nobody reads this answer), or the clock
		// is broken: no decision, so no admission.
		d = Decision{Kind: Shedding, RetryAfter: shedHint, rule: -1}
	}
	if c.answer.headers == nil {
		d.writeHeaders(w.Header(), &a.slab)
	} else {
		c.answer.headers(w.Header(), d)
	}
	if !d.Allowed {
		c.put(a)
		c.answer.reject(w, r, d)
		return
	}
	a.w.ResponseWriter, a.w.status = w, 0 // field by field: see clearAsk
	m.serve(a, r)
	if c.reading.actual != nil {
		if n, ok := c.reading.actual(w.Header()); ok && n >= 0 {
			c.recost(a, c.now(), n)
		}
	}
	c.served(ctx, a)
}

// decide decides a, for r from client address *ip (read: already read;
// else decide reads it when the rules need it), into d (the zero
// Decision): decideIn on what askOf reads of r or, on a lean middleware
// (no option that reads more of r than its address and category),
// decideIn's steps in line, for a Controller without an Observer, with
// two short paths: a request whose plan is local on a set without per-key
// rules is decided by decideLean, which reads nothing of the client (not
// even its address: no rule keys on it, so an unknown peer or a trusted
// proxy's is neither counted nor logged) and writes nothing of a.ask
// (a.bare); one on a plan of per-key rules alone by decideKeyed (see
// decideStored). The categorizer is called once.
func (m *middleware) decide(ctx context.Context, a *ticket, r *http.Request, ip *fingerprint.ClientIP, read bool, d *Decision) error {
	c := m.c
	now := c.now()
	if !m.lean {
		c.askAt(a, r, ip, now, false)
		return c.decideIn(ctx, a, r, d, false)
	}
	s := c.set.Load()
	if s.stores {
		if !read {
			*ip = c.reading.res.ClientIP(r)
		}
		c.askAt(a, r, ip, now, false)
		return m.decideStored(ctx, a, r, d)
	}
	// load's set: no epoch to enter; no per-key rule, so no key to read.
	cat := ""
	if s.categorized() {
		cat = s.cat(r)
	}
	if p := s.planFor(cat, ""); p.local && now > 0 {
		c.decideLean(a, s, p, now, d)
		return nil
	}
	if !read {
		*ip = c.reading.res.ClientIP(r)
	}
	c.askAt(a, r, ip, now, false)
	a.set, a.ask.Category = s, cat
	return c.decide(ctx, a, d)
}

// decideStored is decideIn for the lean middleware's request a (a.ask
// filled) on a set with per-key rules: counted in its epoch until its
// store call is done, the categorizer's category, the request's parts
// for Composite keys; a plan of per-key rules alone that never wait is
// decided by decideKeyed, any other by decide.
func (m *middleware) decideStored(ctx context.Context, a *ticket, r *http.Request, d *Decision) error {
	c := m.c
	c.enter(a)
	defer c.leave(a)     // also when the categorizer or the decision hook panics
	a.set = c.set.Load() // the set in force once counted: maybe another one
	if a.set.categorized() {
		a.ask.Category = a.set.cat(r)
	}
	if a.set.keyed != nil {
		a.readParts(&a.set.req, r)
	}
	if p := a.set.planFor(a.ask.Category, ""); a.ask.Now > 0 && p.keyedOnly() {
		return c.decideKeyed(ctx, a, p, d)
	}
	return c.decide(ctx, a, d)
}

// askOf is askAt at the Controller's clock.
func (c *Controller) askOf(a *ticket, r *http.Request, ip fingerprint.ClientIP, peek bool) {
	c.askAt(a, r, &ip, c.now(), peek)
}

// askAt fills a.ask from r, whose client address is *ip, at now: the client's
// address group, its identities, tier, priority, weight and attributes
// (WithClient), its suspicion (WithSuspicion) and the request's cost
// (WithCost). With peek it feeds no signal to the suspicion tracker (the
// client's score is read as it stands) and counts and logs nothing.
func (c *Controller) askAt(a *ticket, r *http.Request, ip *fingerprint.ClientIP, now int64, peek bool) {
	a.ask.Now = now
	if c.set.Load().queued {
		a.ask.Queued = queuedOf(r)
	}
	if ip.Group.IsValid() {
		a.ask.IP, a.ask.CGNAT = ip.Group.Addr(), ip.CGNAT
		if ip.Source == fingerprint.SourceProxyPeer && !peek {
			c.proxyPeer(a)
		}
	} else if !peek {
		c.unknownPeer(a, r.RemoteAddr)
	}
	var signals []fingerprint.Signal
	if c.reading.client != nil {
		cl := c.reading.client(r)
		a.ask.User, a.ask.APIKey, a.ask.Tenant, a.ask.Tier, a.ask.Priority = cl.User, cl.APIKey, cl.Tenant, cl.Tier, cl.Priority
		a.ask.Attributes = cl.Attributes
		a.ask.Weight = cl.Weight
		signals = cl.Signals
	}
	if c.suspicion != nil && a.ask.IP.IsValid() {
		c.observe(a, r, signals, peek)
	}
	if c.reading.cost != nil {
		a.ask.Cost = c.reading.cost(r)
	}
}

// serve runs the handler; when it does not return, because it panics or
// ends its goroutine with runtime.Goexit (t.FailNow in a test server), the
// attempt's permits are returned (neither says anything about capacity)
// before the panic or the exit goes on, and the attempt is not recycled
// (the handler may still hold its writer).
func (m *middleware) serve(a *ticket, r *http.Request) {
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover() // nil for Goexit, which recover does not stop
		m.c.end(a, 0, Ignore, -1)
		a.ctr[cPanics].Add(1)
		if p != nil {
			panic(p)
		}
	}()
	m.next.ServeHTTP(&a.w, r)
	returned = true
}

// statusWriter records the status the handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer when it can.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack takes over the connection when the underlying writer can (for
// handlers that assert http.Hijacker rather than use
// http.ResponseController); the permits stay held until the handler
// returns.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
