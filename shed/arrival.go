package shed

import (
	"context"
	"net/http"
	"time"
)

// ArrivalSource tells when the bytes read from one connection reached the
// host. connguard's Guard provides one per connection it holds (see its
// ConnContext).
type ArrivalSource interface {
	// LastArrival returns when the latest bytes read from the connection
	// reached the host, in Unix nanoseconds (the kernel's receive
	// timestamp), and false when that is not known. It must be safe to
	// call while the connection is read.
	LastArrival() (unixNano int64, ok bool)
}

type arrivalsKey struct{}

// WithArrivals returns a copy of ctx that carries src: what an
// http.Server's ConnContext returns for a connection, so that the
// middleware fills each request's Attempt.Queued with the time since the
// latest bytes read from the connection arrived (for a request that is
// not pipelined, its own: net/http has read its header when the
// middleware runs), when some Adaptive rule bounds it. The wait is
// measured on the wall clock, whatever the Controller's clock (WithClock).
func WithArrivals(ctx context.Context, src ArrivalSource) context.Context {
	return context.WithValue(ctx, arrivalsKey{}, src)
}

// ArrivalsFrom returns the ArrivalSource that ctx carries (WithArrivals),
// for a handler or an adapter that wants the arrival times itself.
func ArrivalsFrom(ctx context.Context) (ArrivalSource, bool) {
	src, ok := ctx.Value(arrivalsKey{}).(ArrivalSource)
	return src, ok
}

// queuedOf returns how long r has waited since its connection's latest
// bytes arrived, 0 when its context carries no ArrivalSource or the
// source does not know.
func queuedOf(r *http.Request) time.Duration {
	src, ok := ArrivalsFrom(r.Context())
	if !ok {
		return 0
	}
	at, ok := src.LastArrival()
	if !ok {
		return 0
	}
	return max(0, time.Duration(time.Now().UnixNano()-at))
}
