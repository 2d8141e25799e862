package upstream

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/sfv"
)

// quota is one quota an upstream reported on a response: Remaining
// units left until Reset from the response's arrival, out of Limit (0 when
// the upstream did not say). Name is the IETF policy name ("" for the
// X-RateLimit-* fields).
type quota struct {
	name      string
	remaining int64
	limit     int64
	reset     time.Duration
}

// maxQuotas bounds how many quotas one response may report that a
// Transport keeps per key; further ones are ignored.
const maxQuotas = 4

// maxSeconds bounds every delta in seconds taken from a header (a
// year): larger values are treated as that, so that no sum overflows.
const maxSeconds = 365 * 24 * 3600

// epochSeconds separates the two readings of X-RateLimit-Reset:
// values at or above it are Unix times in seconds (GitHub's style), smaller
// ones are delta-seconds.
const epochSeconds = 1_000_000_000

// parseRetryAfter parses a Retry-After field value, delta-seconds or an
// HTTP-date, into the wait from date (the time the response arrived, as
// wall-clock time). It reports false for an absent or invalid value. A date
// in the past is a wait of zero.
func parseRetryAfter(v string, date time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, ok := deltaSeconds(v); ok {
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(date)
	if d < 0 {
		d = 0
	}
	return min(d, maxSeconds*time.Second), true
}

// deltaSeconds parses a non-negative integer of seconds, capped at
// maxSeconds.
func deltaSeconds(v string) (int64, bool) {
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	if len(v) > 15 {
		return maxSeconds, true
	}
	n, _ := strconv.ParseInt(v, 10, 64) // at most 15 digits: cannot fail
	return min(n, maxSeconds), true
}

// readQuotas reads the quotas an upstream reported in h: the IETF
// RateLimit field (with limits from RateLimit-Policy), else the
// X-RateLimit-Remaining / -Reset / -Limit fields. date is the wall-clock
// time the response arrived, for a Reset given as a Unix time. Invalid
// fields are ignored; items without a remaining count or a reset time are
// skipped, since neither alone says how long the count holds.
func readQuotas(h http.Header, date time.Time) []quota {
	// The field names are written in canonical form (as http.Header keeps
	// them), which spares Get and Values a copy of each.
	if v := h.Values("Ratelimit"); len(v) > 0 {
		if items, ok := rateLimitList(strings.Join(v, ",")); ok {
			policies, _ := rateLimitList(strings.Join(h.Values("Ratelimit-Policy"), ","))
			var qs []quota
			for _, it := range items {
				r, okR := it.IntParam("r")
				t, okT := it.IntParam("t")
				if !okR || !okT || r < 0 || t < 0 {
					continue
				}
				qs = append(qs, quota{
					name:      it.S,
					remaining: r,
					limit:     policyLimit(policies, it.S),
					reset:     time.Duration(min(t, maxSeconds)) * time.Second,
				})
				if len(qs) == maxQuotas {
					break
				}
			}
			if len(qs) > 0 {
				return qs
			}
		}
	}
	rem, ok := deltaSeconds(strings.TrimSpace(h.Get("X-Ratelimit-Remaining")))
	if !ok {
		return nil
	}
	rv := strings.TrimSpace(h.Get("X-Ratelimit-Reset"))
	if rv == "" || len(rv) > 15 || strings.Trim(rv, "0123456789") != "" {
		return nil
	}
	reset, _ := strconv.ParseInt(rv, 10, 64) // at most 15 digits: cannot fail
	var d time.Duration
	if reset >= epochSeconds {
		// A Unix time is whole seconds: the reset can be up to a second
		// later than written, never earlier. reset has at most 15 digits,
		// so the difference cannot overflow.
		secs := reset - date.Unix() + 1
		d = time.Duration(min(max(secs, 0), maxSeconds)) * time.Second
	} else {
		d = time.Duration(min(reset, maxSeconds)) * time.Second
	}
	limit, _ := deltaSeconds(strings.TrimSpace(h.Get("X-Ratelimit-Limit")))
	return []quota{{remaining: rem, limit: limit, reset: d}}
}

// maxMembers caps the members kept of one list, and the
// parameters kept of one member, so that a hostile header costs bounded
// memory; the rest are checked, then ignored.
const maxMembers = 16

// rateLimitList parses a RateLimit or RateLimit-Policy field
// value: a Structured Field List of Strings or Tokens naming policies, with
// parameters whose values are Integers, Strings, Tokens, Byte Sequences or
// Booleans. It reports false for a value that is not a valid List, or a
// List of another shape (an Inner List, a number as a member, a Decimal
// parameter): the whole field is then ignored, as RFC 9651 asks. The shape
// is judged on what is kept: the first maxMembers members, and
// as many parameters of each.
func rateLimitList(v string) ([]sfv.Member, bool) {
	items, err := sfv.ParseList(v, maxMembers)
	if err != nil {
		return nil, false
	}
	for _, it := range items {
		if it.Kind != sfv.String && it.Kind != sfv.Token {
			return nil, false
		}
		for _, p := range it.Params {
			switch p.Kind {
			case sfv.Decimal, sfv.Date, sfv.DisplayString:
				return nil, false
			}
		}
	}
	return items, true
}

// policyLimit returns the quota q of the policy named name, from
// the last such policy with a positive q; 0 when there is none.
func policyLimit(policies []sfv.Member, name string) int64 {
	for i := len(policies) - 1; i >= 0; i-- {
		if q, ok := policies[i].IntParam("q"); ok && q > 0 && policies[i].S == name {
			return q
		}
	}
	return 0
}
