package streamshed

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// Accept decides the connection that r opens (the attempt WithAttempt
// builds from r, in the Guard's category, on r's context; see Open). When
// it is admitted, Accept returns its Conn and the caller goes on (upgrades
// to a WebSocket, binds the Conn's CloseFunc, defers Done). When it is
// not, Accept answers r itself, as shed's middleware answers a rejection,
// and returns nil: 429 when the client is over a limit or penalized, 503
// when the server sheds load or the decision failed, with the rate-limit
// header fields, Retry-After (whole seconds, rounded up) when the attempt
// may ever be admitted, and a problem+json body (Decision.WriteRejection).
func (g *Guard) Accept(w http.ResponseWriter, r *http.Request) *Conn {
	c, d, err := g.Open(r.Context(), g.attempt(r))
	if c != nil {
		return c
	}
	if err != nil {
		// The client went away, or the clock is broken: no decision, so
		// no admission, and nothing the client did.
		d = shed.Decision{Kind: shed.Shedding, RetryAfter: time.Second}
		w.Header().Set("Retry-After", "1") // a Decision of no rule set writes no fields
	}
	d.WriteHeaders(w.Header())
	d.WriteRejection(w)
	return nil
}

// Middleware returns next behind the Guard, for handlers that stream their
// response over a long-lived connection (server-sent events): every
// request is decided by Accept, and an admitted one holds its Conn's Token
// until next returns, on every path (a panic or runtime.Goexit of next
// gives it back before going on). The stream has no close codes and no
// incoming messages: when the Conn ends before next returns (the Guard's
// maximum lifetime), the context next sees is cancelled instead, and next
// is expected to return.
func (g *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := g.Accept(w, r)
		if c == nil {
			return
		}
		defer c.Done()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c.Bind(func(int, string) error { cancel(); return nil })
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
