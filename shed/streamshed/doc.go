// Package streamshed limits long-lived connections (WebSockets, server-sent
// event streams, any stream over a net.Conn) with a shed.Controller: how
// often a client may open one, how many it may hold open at once, and how
// fast it may send messages on each. It imports no WebSocket library: the
// adapter is a message callback and a close func, which fit
// github.com/coder/websocket and github.com/gorilla/websocket alike.
//
// # Opening a connection
//
// A Guard decides the opening of every connection through
// shed.Controller.Decide, with the Guard's category ("connect" unless
// WithCategory says otherwise), so that the Controller's rules of that
// category apply: a per-key rate rule (TokenBucket or a window) limits how
// often a user or an address may connect, and a per-key Concurrency rule
// limits how many connections it holds open. The admitted connection is a
// Conn, which holds the decision's Token for the connection's whole life
// and gives it back once, when the connection ends: Conn.Done (defer it,
// so that an error, a panic or runtime.Goexit of the handler give it back
// too), a message-rate violation, or the end of the context the Conn was
// opened with.
//
// A per-key Concurrency rule keeps its permits in the store as leases of
// Rule.LeaseTTL, so that a crashed process cannot leak them. The store has
// no way to renew a lease: a lease lapses at LeaseTTL even while its
// connection is open, and from then on the client may open one more
// connection than its limit. Set LeaseTTL above the longest connection you
// allow, and bound connections below it with WithMaxLifetime: the Guard
// then closes a connection (close code 1001, Going Away) before its lease
// can lapse.
//
// # Messages
//
// Every Conn has its own token bucket of messages, in process (no store
// round trip per message): DefaultMessageBurst messages at once, refilled
// at DefaultMessagesPerSecond, unless WithMessageLimit says otherwise. The
// connection's reading loop calls Conn.Message for every message it
// receives, before acting on it. When the bucket is empty, Message does
// not drop the message silently: it closes the connection through the
// CloseFunc given to Conn.Bind with PolicyViolation (1008) and a reason,
// gives the Token back, and returns ErrPolicyViolation, and the loop
// stops.
//
// With github.com/coder/websocket the close func is
//
//	func(code int, reason string) error { return ws.Close(websocket.StatusCode(code), reason) }
//
// and with github.com/gorilla/websocket
//
//	func(code int, reason string) error {
//		msg := websocket.FormatCloseMessage(code, reason)
//		err := ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
//		return errors.Join(err, ws.Close())
//	}
//
// A stream without close codes (an accepted TCP connection, a hijacked
// HTTP one) uses Conn.NetConn: the Guard's ends close the net.Conn, and
// closing the net.Conn ends the Conn. Guard.Listener puts a whole
// net.Listener behind the Guard: a refused connection is closed before
// anyone sees it.
//
// # HTTP
//
// Guard.Accept decides an HTTP request that opens a connection (a
// WebSocket upgrade, before the upgrade) and answers a rejection with 429
// or 503 and Retry-After. Guard.Middleware does the same for a handler
// that streams its response (server-sent events): the connection's Token
// is held until the handler returns, on every path.
package streamshed
