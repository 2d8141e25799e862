// Package connguard protects an http.Server at accept, before a connection
// costs a goroutine, a read and a parse: it bounds the connections the
// server holds, closes idle keep-alive connections first when a new one
// arrives at the bound, and refuses new connections while a
// shed.Controller sheds load. It also tells the Controller when each
// request reached the host, so that an Adaptive rule sheds what waited
// too long in front of its handler (see Arrival times), and with
// WithEarlyAnswer it answers those requests itself, before net/http reads
// them (see Answering early).
//
// It is the cheap answer to a dial storm. When clients with timeouts
// overload an HTTP/1.1 server, every timed-out request closes its
// connection and the retry dials a new one, so that at 5x overload nearly
// every request is a new connection; answering each with the middleware's
// 503 still costs the accept, a goroutine, TLS or not, reading and parsing
// the request and writing the response (110-190 µs of CPU per 503 on a new
// connection, measured in bench/cmd/overload), which on one core eats the
// capacity the shedding protects. The Guard answers in its accept loop:
// one read that never waits, one write and one close; no goroutine, no
// parse. Measured there (loopback, one core, a new connection per
// request), a refusal costs about half (0.51 to 0.59) of the middleware's
// 503 on a new connection (168-278 against 329-469 µs), about what an
// empty 200 costs on a kept-alive connection; two thirds to four fifths of
// it is kernel time (the TCP connection itself), which no listener wrapper
// saves.
//
// # Use
//
//	g, err := connguard.New(ctl, 1000)           // ctl is the *shed.Controller
//	srv := &http.Server{Handler: ctl.Middleware(h)}
//	g.Install(srv)                               // its ConnState and ConnContext
//	err = srv.Serve(g.Listener(ln))
//
// Where the middleware wraps the server's whole handler, as here, add
// connguard.WithEarlyAnswer() to New's options: the requests the
// Controller sheds for their wait are then answered at half the cost.
//
// Size the bound for the requests the server must still answer, shed or
// not: their arrival rate times how long each holds its connection (at
// least the time to be read and answered; under overload, the wait Default
// bounds, 20 ms). A bound the clients reach under overload makes the
// Guard close idle kept-alive connections and refuse new ones, and every
// closed connection comes back as a dial: in bench/cmd/overload, at 8,700
// requests a second on one core, a bound of 1000 was reached in two
// rounds of nine, whose goodput fell from 0.64-0.78 to 0.03 and 0.56;
// 4000 was never reached in six (at most 878 open). Clients that are slow
// to read their answers hold their connections longer: where the load
// generator itself was starved of CPU (17,000 requests a second from a
// process sharing the server's cores), 4000 filled, the Guard closed
// 2,200-6,200 idle connections per 1.8 s, and a third of the answers were
// connection errors on the clients' side, requests sent on a connection
// as it was closed.
//
// Install sets the server's ConnState and ConnContext, calling the
// server's own first. ConnState is what closes idle connections first
// (without it every connection counts as busy); ConnContext gives the
// middleware each request's arrival time (see Arrival times): without it
// the Guard still bounds and refuses, but Default cannot shed by the
// wait. A server wired by hand sets both to the Guard's methods, or calls
// them from its own.
//
// # Decisions at accept
//
// For every connection the wrapped listener accepts, in order:
//
//  1. Shedding: while the Signal (Controller.Shedding: the share an
//     Adaptive rule sheds because the scheduling delay is above its
//     target) is above zero, that share of new connections is refused,
//     spread evenly (an error-diffusion counter: exactly floor(n*share)
//     of n connections, give or take one, no randomness). With WithPause
//     none is refused for shedding: the listener is paced instead (see
//     Pausing).
//  2. The bound: a connection past the bound takes the place of an idle
//     connection (http.StateIdle), which is closed: the one idle the
//     longest of the first 32 idle ones the Guard holds (oldest first), so
//     that, with clients that reuse their latest idle connection first, as
//     net/http's Transport does, the closed one is seldom carrying a
//     request already. When none is idle it is refused. Connections that
//     are new (no request yet), active or hijacked are never closed by the
//     Guard.
//
// A refused connection gets, with Respond (the default), a pre-written
// "HTTP/1.1 503 Service Unavailable" with Retry-After (1 s unless
// WithRetryAfter says otherwise) and Connection: close, and is closed; with
// Close it is closed at once (the client sees a connection error, the
// cheapest answer). Respond first reads what the client sent already, in
// one read that never waits (on Unix): a client reads a response that
// comes before its request as a broken connection, and closing a socket
// with unread bytes resets it under the response. A connection whose
// request has not arrived yet is closed without a word (Stats.Unanswered),
// which the client sees as a connection error with no Retry-After. In
// bench/cmd/overload that was 68 to 83% of the refusals at 1x and most of
// them (up to 99%) in the dial storm at 5x and 10x: the accept loop
// reached a new connection before its request. So with Respond, on Linux,
// the Listener has the kernel hand over a TCP connection only once its
// first bytes arrived (TCP_DEFER_ACCEPT; see Listener): there, every one
// of 1,915 refusals at 1x was answered, at no measurable extra cost, and
// what is still closed unanswered in a dial storm is mostly connections
// whose client gave up before it sent its request. An HTTP/2 client (h2c with prior knowledge, or
// TLS) cannot read an HTTP/1.1 response: use Close for them. An HTTP/2
// connection is idle only while none of its streams is open, so HTTP/2
// clients under load can fill the bound with busy connections; one that
// dials anew for each refused connection then keeps a storm going (in
// bench/cmd/overload's storm scenario over h2c, net/http's Transport
// dialled thousands of connections after a stall of its own, and in one
// round of three the bound of 4000 held and goodput stayed near zero).
//
// # Pausing
//
// A refusal at accept still costs the server most of what a 503 costs:
// the kernel's side of the TCP connection (the handshake, the accept, the
// close) is most of it (about 150 µs of CPU per refusal in
// bench/cmd/overload, on a VM where syscalls are dear), so a dial storm of
// refusals alone can take more than the core it protects. With WithPause
// the Guard does not refuse for shedding: it paces its listener instead.
// While the Signal sheds a share f, the listener does not accept during
// the last f of every period (WithPause's argument, counted from when
// Listener was called): Accept waits, and the connections wait in the
// kernel's accept queue until the next open part, or are never accepted.
// With WithBacklog the queue is short, so that the kernel drops the SYNs
// of the surplus connections and what waits in the queue is at most a few
// periods old. At 1 the listener accepts nothing; at 0 it accepts as
// without the Guard. What the Signal says is read at least once a period
// (ln's Accept gets the end of the open part as its deadline when ln
// takes one, as TCP and Unix listeners do: the Guard then owns ln's
// deadline), and again when one of the Guard's connections goes idle or
// closes, which ends a pause early if the Signal sheds less than when the
// pause began. At the bound too the pacing listener does not accept to
// refuse: while it holds its bound and none of its connections is idle,
// it waits as in a pause, until one closes or goes idle (a walk of the
// held list per wait, under the lock admit takes). A pause is a select on
// a timer, one per Accept call, and no goroutine.
//
// What this means for clients: a connection that is not accepted is not
// answered at all. Its client's SYN goes unanswered and is sent again (1
// s later on Linux, then 3 s...), or the handshake completes and the
// request waits in the queue; either way the client sees a connect or
// request timeout, never a 503 or a Retry-After, and an HTTP client
// cannot tell a paused server from an unreachable one. In production that
// is right when clients are other services with connect timeouts and
// retry budgets, and a load balancer in front takes the refused
// connections' clients elsewhere; it is wrong where clients must be told
// when to come back. On loopback and in a host's own network stack the
// kernel does the handshake and drops SYNs in softirq context, mostly on
// the sender's CPU: what the server does not accept costs its process
// nothing.
//
// Measured in bench/cmd/overload on a quiet 2-core VM (server on one
// core, 1 ms of CPU per request, bench/README.md): a server whose pacing
// listener accepted nothing spent 8 µs of CPU per connection dialled at
// it, where a refusal at accept cost 112 µs and the middleware's 503 on a
// new connection 192 µs. At 10x the endpoint's capacity the pacing
// listener kept goodput 0.33-0.48 where every answering contender
// collapsed (0.01-0.08), but the p99 of what it served stayed near the 1 s
// deadline; at 5x it did no better than the refusing Guard (goodput 0.69
// against 0.70, p99 668 against 172 ms). Pausing is therefore an option,
// not the default: it suits clients that retry elsewhere.
//
// With WithIdleShed the Guard also closes the shed share of its
// connections as they go idle (through ConnState): a kept-alive client
// then dials for its next request, into the paused listener, instead of
// reaching the middleware's 503 on its old connection.
//
// Closing an idle connection races with a request arriving on it, as
// http.Server.Shutdown does: a client that sent a request as the
// connection was closed sees it fail, and net/http's client retries an
// idempotent one on a new connection.
//
// # Arrival times
//
// A CPU-bound server on few cores queues in front of its handlers: in
// the kernel's accept queue and socket buffers and in the Go run queue,
// where no middleware sees a request until it has waited. On Linux the
// Guard reads its TCP connections with the kernel's receive timestamps
// (SO_TIMESTAMPNS on the listener, which its connections inherit, and
// recvmsg(2) in Read: no allocation; one byte written and read on
// loopback, 7.8 µs against 7.7 with read(2), BenchmarkRead), and
// ConnContext hands each connection to the middleware
// (shed.WithArrivals), which sets each request's Attempt.Queued to the
// time since its bytes reached the host. An Adaptive rule of
// adaptive.Default sheds a request that waited past its queue bound (2
// scheduling targets: 20ms; 2.5ms under a standing overload) at once, so
// that what it admits never waited long and a surge is met from its first
// requests, not a window later:
//
//	srv := &http.Server{Handler: ctl.Middleware(h)}
//	g.Install(srv)
//
// The time is that of the latest bytes read from the connection: for an
// HTTP/1.1 request, its own (net/http has read its header when the
// middleware runs). Over HTTP/2 the latest read may be another stream's,
// so the wait is underestimated and sheds less, never more. Bytes read
// without a timestamp (the host turns stamping on a moment after the
// first socket asks) make the arrival unknown, which sheds nothing.
//
// Measured in bench/cmd/overload (a CPU-bound endpoint, 1 ms of CPU per
// request, the server on one core, medians of three rounds): with the
// Guard and its ConnContext, Default kept goodput 0.93 of capacity at 5x
// and 0.83 at 10x with a p99 of 22 ms (over six runs that day 0.79-0.94
// and 0.54-0.83, the low ones on a slower host or with a bound the
// clients reached); the middleware alone, which sees the queue only
// through the process's scheduling delay, kept 0.56-0.69 at 187-459 ms at
// 5x and collapsed at 10x (0.25-0.39, at 969-972 ms).
//
// # Answering early
//
// Shed at once, a request the middleware answers has still cost the
// server what net/http spends on every request: the parse, the Request and
// its context, a goroutine for the background read, the response writer.
// On a CPU-bound server at 10x its capacity that is what most of the core
// goes to besides the admitted work.
//
// With WithEarlyAnswer the Guard answers such a request itself, before
// net/http reads it. When the server reads a connection between requests
// with nothing of it buffered, the Guard looks at what arrived: for each
// whole bodiless HTTP/1.1 request that its Signal sheds for its wait
// (WaitShedder; Controller.ShedWaited: the wait past an Adaptive rule's
// queue bound, counted from when the bytes reached the host), it writes
// the middleware's 503 (its problem document and Retry-After) and reads
// on; the server gets the bytes it did not answer, exactly as they came.
// A request is answered only when its head parses strictly (one Host, no
// Content-Length, Transfer-Encoding, Upgrade or Expect field, no
// Connection but keep-alive, CRLF line ends; FuzzReadHead checks the
// framing against net/http's) and its arrival is known; a body, HTTP/1.0,
// a head split over two reads go to the server, and TLS or HTTP/2 bytes
// leave the connection to the server for good. The Controller decides
// only where nothing in the request could change the outcome (no client
// function, exemptions, categories or tiers; see Controller.ShedWaited)
// and counts each answer as the middleware's shed (Stats, the rule's
// ShedByWait and window, the decision hook and Observer), so Default's
// standing-queue bound sees them; Stats.EarlyAnswers counts them here.
//
// The Guard answers for the whole server: use WithEarlyAnswer where the
// Controller's middleware wraps every handler, or a request for one
// outside it (a health check) that waited past the bound is answered 503
// too. It needs the Guard's ConnState (Install): without the connection's
// state it cannot tell a read between requests from one of a body, and
// answers nothing. It knows net/http's read between requests by its size
// (net/http reads into a 4 KiB buffer): a server that reads otherwise gets
// no early answer. The server's deadlines stay its own: an answer is
// written under a deadline of its own, and the request after it is read
// under the read deadline the server set for the one answered (its idle
// or header timeout), and the connection stays open after an answer, as
// HTTP/1.1 connections do (also on a server with keep-alives disabled,
// which closes it after its own next answer). The answer has no Date
// field (optional in a 5xx).
// A request the Guard reads but does not answer costs the parse of its
// head: 0.2-0.35 µs for a browser's 400 bytes (BenchmarkReadHead).
//
// Measured in bench/cmd/overload (a CPU-bound endpoint, 1 ms of CPU per
// request, the server on one core, 2026-12-05): at 8,300-9,400 requests
// a second, an early answer cost the server 25-27 µs of CPU against 42-58
// for the middleware's 503 on the same kept-alive connections (medians of
// two runs of three and five rounds; 19-20 against 34 at best). Default
// behind the Guard kept goodput 0.88 (0.84-0.94) of capacity at 10x with
// early answers against 0.84 (0.52-0.88) without, and 0.89 against 0.84 at
// 5x, at the same p99 (4-5 ms), five interleaved rounds; the endpoint with
// a downstream wait as well 0.85 (0.80-0.91) against 0.81 (0.69-0.84) at
// 10x. Later runs on a slower phase of the host had medians of 0.56-0.83
// with early answers and 0.04-0.79 without at 10x: some rounds lost their
// first seconds to the dial storm of a cold start (every request a new
// connection, the bound reached), with or without them, which a moment's
// stall of the load generator sets off. Set off on purpose (the storm
// scenario: the clients stall for 0.3 s, then send what they owe, most of
// it on new connections), goodput was back 0.3 s (0.3-0.4) after the
// stall at 5x with early answers and 0.4 s without, 0.9 s and 1.2 s at 10x,
// where the generator's own core, dialling for every client at once,
// bounded it (the peers, on one core, collapse with or without a stall).
//
// # Cost and counting
//
// The Guard counts what it did (Stats). It starts no goroutine. A
// connection costs one short lock at accept and one at close (the list of
// held connections, oldest first); state changes (ConnState, several per
// request) are one atomic store each, and a decision at accept is one
// atomic add and one load per Adaptive rule (Controller.Shedding).
//
// The Guard is a different idea from streamshed.Guard.Listener, which
// decides every connection through the Controller's rules (per address,
// per user): connguard protects the server as a whole, by its own bound and
// the Controller's overload signal, and never calls Decide.
package connguard
