// Package upstream is sluice's client side: calls to services that limit
// you. Where package shed decides what a service lets in, upstream makes a
// client a good citizen of the services it calls, as http.RoundTrippers to
// put under an http.Client:
//
//   - Transport (NewTransport) paces requests per upstream key to the
//     upstream's published rate times a reserve, honours Retry-After and
//     the quotas the upstream reports (X-RateLimit-*, or the IETF RateLimit
//     and RateLimit-Policy fields), rejects locally with the SRE adaptive
//     throttling probability when the upstream rejects much of what it is
//     sent (ErrThrottled), optionally caps the requests in flight, and
//     fails a request at once when its turn falls after its deadline
//     (ErrDeadline) or beyond the max wait (ErrMaxWait);
//   - RetryTransport (NewRetryTransport) retries failed requests within a
//     retry budget, with jittered exponential backoff or exactly the
//     Retry-After sent, so that retries do not multiply load in an outage.
//
// Put a RetryTransport in front of a Transport: the Transport paces and
// learns, the RetryTransport decides whether to try again. Options of
// NewTransport are Options; options of NewRetryTransport are RetryOptions,
// so one cannot be given to the other. Stats and RetryStats snapshot the
// counters (shed/promshed exports them to Prometheus).
//
// Everything here is safe for concurrent use, starts no goroutine, needs
// no Close, takes the time from internal/clock and blocks on timers, so it
// runs under testing/synctest. Errors start with "upstream: ".
package upstream
