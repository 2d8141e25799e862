package shed

import (
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/concurrency"
)

// Canonical header keys, so that setting them indexes the map directly.
const (
	hRateLimitPolicy = "Ratelimit-Policy"
	hRateLimit       = "Ratelimit"
	hXLimit          = "X-Ratelimit-Limit"
	hXRemaining      = "X-Ratelimit-Remaining"
	hXReset          = "X-Ratelimit-Reset"
	hXWarning        = "X-Ratelimit-Warning"
	hRetryAfter      = "Retry-After"
	hContentType     = "Content-Type"
	hNoSniff         = "X-Content-Type-Options"
)

// headerBlock holds the header values of one response that vary: the
// value slices and their bytes, in one allocation (112 bytes, a size
// class). The strings point into buf; nothing writes to a block after it
// is filled. Values that do not fit (a long rule name, a warning,
// Retry-After) go to the heap as append grows b.
type headerBlock struct {
	vals [3]string // RateLimit, X-RateLimit-Remaining, X-RateLimit-Reset
	buf  [64]byte
}

// HeaderFields selects which rate-limit header fields Decision.WriteHeaders
// sets (WithHeaderFields). X-RateLimit-Warning and Retry-After are always
// set when they apply.
type HeaderFields uint8

const (
	// DraftFields are RateLimit-Policy and RateLimit (the IETF httpapi
	// draft, Structured Fields).
	DraftFields HeaderFields = 1 << iota
	// LegacyFields are X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset.
	LegacyFields
	// AllFields is both, the default.
	AllFields = DraftFields | LegacyFields
)

// WriteHeaders sets the rate-limit header fields of d on h (those selected
// by WithHeaderFields; all by default): RateLimit-Policy
// (every rate rule that applied) and, for the deciding rate rule, RateLimit,
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix
// seconds, rounded up); X-RateLimit-Warning past a soft limit; Retry-After
// in delta-seconds, rounded up, on a rejection that can succeed later. It
// is the middleware's default (see WithHeaders).
//
// It allocates once. The RateLimit-Policy and X-RateLimit-Limit values
// are computed once per rule set and shared by every response: replace
// them (Header.Set, Header.Add) rather than write into their slices.
func (d Decision) WriteHeaders(h http.Header) {
	if d.plan == nil {
		return
	}
	draft, legacy := d.plan.fields&DraftFields != 0, d.plan.fields&LegacyFields != 0
	if draft && d.plan.policyV != nil {
		h[hRateLimitPolicy] = d.plan.policyV
	}
	var (
		blk *headerBlock
		b   []byte
		n   int
	)
	// set gives key the value b[from:], a string sharing b's memory: b only
	// grows past it from here on (into a new array if it must, which the
	// earlier strings do not see).
	set := func(key string, from int) {
		v := unsafe.String(&b[from], len(b)-from) // never empty: digits or a name
		if n == len(blk.vals) {                   // the rare fields: a warning, Retry-After
			h[key] = []string{v}
			return
		}
		blk.vals[n] = v
		h[key] = blk.vals[n : n+1 : n+1]
		n++
	}
	if d.rule >= 0 || d.Warning || !d.Allowed {
		blk = new(headerBlock)
		b = blk.buf[:0]
	}
	if d.rule >= 0 {
		r := &d.plan.rules[d.rule]
		b = append(b, r.itemPrefix...)
		b = strconv.AppendInt(b, max(0, d.Remaining), 10)
		end := len(b)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(d.Reset), 10)
		if draft {
			set(hRateLimit, 0)
		}
		if legacy {
			h[hXLimit] = r.limitV
			// X-RateLimit-Remaining is the r of the item: the same bytes.
			blk.vals[n] = unsafe.String(&b[len(r.itemPrefix)], end-len(r.itemPrefix))
			h[hXRemaining] = blk.vals[n : n+1 : n+1]
			n++
			from := len(b)
			b = strconv.AppendInt(b, ceilSeconds(time.Duration(d.wall+int64(d.Reset))), 10)
			set(hXReset, from)
		}
	}
	if d.Warning {
		from := len(b)
		b = append(b, "quota "...)
		b = appendSFString(b, d.WarningRule)
		b = append(b, " is past its soft limit"...)
		set(hXWarning, from)
	}
	if !d.Allowed && d.RetryAfter != concurrency.Never {
		from := len(b)
		b = strconv.AppendInt(b, max(1, ceilSeconds(d.RetryAfter)), 10)
		set(hRetryAfter, from)
	}
}

// Problem types of the RateLimit header fields draft (RFC 9457 bodies).
const (
	problemQuota    = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	problemCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	problemAbuse    = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
)

// WriteRejection answers a rejected request: the status of d.Kind (429 or
// 503) and an application/problem+json body (RFC 9457) of the draft's
// problem type: quota-exceeded naming the violated policy,
// temporary-reduced-capacity or abnormal-usage-detected. The body holds
// nothing but the kind and the public policy name: no key, no internal
// figure. It is the middleware's default (see WithRejection).
func (d Decision) WriteRejection(w http.ResponseWriter) {
	h := w.Header()
	h[hContentType] = []string{"application/problem+json"}
	h[hNoSniff] = []string{"nosniff"}
	var body []byte
	if d.Kind == OverLimit && d.plan != nil && d.rule >= 0 && d.plan.rules[d.rule].Name == d.Rule {
		body = d.plan.rules[d.rule].problem
	} else {
		body = problemBody(d, "")
	}
	w.WriteHeader(d.Kind.StatusCode())
	_, _ = w.Write(body)
}

// problemBody returns the problem document of a rejection of kind d.Kind,
// naming policy (a rule name, printable ASCII) when it is not "".
func problemBody(d Decision, policy string) []byte {
	var typ, title, detail string
	switch d.Kind {
	case OverLimit:
		typ, title, detail = problemQuota, "Request quota exceeded", "The client has used up a quota of this service; retry after the time given by Retry-After."
	case Penalized:
		typ, title, detail = problemAbuse, "Abnormal usage detected", "The client is temporarily blocked after repeated violations; retry after the time given by Retry-After."
	default:
		typ, title, detail = problemCapacity, "Temporarily reduced capacity", "The service is shedding load to protect itself; retry after the time given by Retry-After."
	}
	status := d.Kind.StatusCode()
	if d.Kind == Admitted {
		status = http.StatusServiceUnavailable
	}
	b := []byte(`{"type":`)
	b = strconv.AppendQuote(b, typ)
	b = append(b, `,"title":`...)
	b = strconv.AppendQuote(b, title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":`...)
	b = strconv.AppendQuote(b, detail)
	if policy != "" {
		b = append(b, `,"violated-policies":[`...)
		b = appendJSONString(b, policy)
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s, printable ASCII, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
