package streamshed

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// Accept decides the connection that r opens (the attempt WithAttempt
// builds from r, in the Guard's category, on r's context; see Open). When
// it is admitted, Accept returns its Conn and the caller goes on (upgrades
// to a WebSocket, binds the Conn's CloseFunc, defers Done). When it is
// not, Accept answers r itself and returns nil: 429 when the client is over
// a limit or penalized, 503 when the server sheds load or the decision
// failed, with Retry-After in whole seconds (rounded up) when the attempt
// may ever be admitted.
func (g *Guard) Accept(w http.ResponseWriter, r *http.Request) *Conn {
	c, d, err := g.Open(r.Context(), g.attempt(r))
	if c != nil {
		return c
	}
	status, retry := d.Kind.StatusCode(), d.RetryAfter
	if err != nil {
		// The client went away, or the clock is broken: no decision, so
		// no admission, and nothing the client did.
		status, retry = http.StatusServiceUnavailable, time.Second
	}
	if retry > 0 && retry != concurrency.Never {
		secs := retry / time.Second
		if retry%time.Second != 0 {
			secs++
		}
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	}
	http.Error(w, http.StatusText(status), status)
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
