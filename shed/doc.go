// Package shed composes sluice's parts into what a service puts in front of
// its endpoints: rules that decide admission per endpoint category and
// client identity, and net/http middleware that answers with correct status
// codes (429 for a client over its limit, 503 when the server sheds load for
// its own protection), Retry-After, X-RateLimit-* and the IETF RateLimit and
// RateLimit-Policy header fields.
package shed
