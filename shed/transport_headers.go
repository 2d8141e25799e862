package shed

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// transportQuota is one quota an upstream reported on a response: Remaining
// units left until Reset from the response's arrival, out of Limit (0 when
// the upstream did not say). Name is the IETF policy name ("" for the
// X-RateLimit-* fields).
type transportQuota struct {
	name      string
	remaining int64
	limit     int64
	reset     time.Duration
}

// transportMaxQuotas bounds how many quotas one response may report that a
// Transport keeps per key; further ones are ignored.
const transportMaxQuotas = 4

// transportMaxSeconds bounds every delta in seconds taken from a header (a
// year): larger values are treated as that, so that no sum overflows.
const transportMaxSeconds = 365 * 24 * 3600

// transportEpochSeconds separates the two readings of X-RateLimit-Reset:
// values at or above it are Unix times in seconds (GitHub's style), smaller
// ones are delta-seconds.
const transportEpochSeconds = 1_000_000_000

// transportRetryAfter parses a Retry-After field value, delta-seconds or an
// HTTP-date, into the wait from date (the time the response arrived, as
// wall-clock time). It reports false for an absent or invalid value. A date
// in the past is a wait of zero.
func transportRetryAfter(v string, date time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, ok := transportDeltaSeconds(v); ok {
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
	return min(d, transportMaxSeconds*time.Second), true
}

// transportDeltaSeconds parses a non-negative integer of seconds, capped at
// transportMaxSeconds.
func transportDeltaSeconds(v string) (int64, bool) {
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	if len(v) > 15 {
		return transportMaxSeconds, true
	}
	n, _ := strconv.ParseInt(v, 10, 64) // at most 15 digits: cannot fail
	return min(n, transportMaxSeconds), true
}

// transportQuotas reads the quotas an upstream reported in h: the IETF
// RateLimit field (with limits from RateLimit-Policy), else the
// X-RateLimit-Remaining / -Reset / -Limit fields. date is the wall-clock
// time the response arrived, for a Reset given as a Unix time. Invalid
// fields are ignored; items without a remaining count or a reset time are
// skipped, since neither alone says how long the count holds.
func transportQuotas(h http.Header, date time.Time) []transportQuota {
	if v := h.Values("RateLimit"); len(v) > 0 {
		items, ok := transportParseSFList(strings.Join(v, ","))
		if ok {
			limits := map[string]int64{}
			if p, ok := transportParseSFList(strings.Join(h.Values("RateLimit-Policy"), ",")); ok {
				for _, it := range p {
					if q, ok := it.intParam("q"); ok && q > 0 {
						limits[it.name] = q
					}
				}
			}
			var qs []transportQuota
			for _, it := range items {
				r, okR := it.intParam("r")
				t, okT := it.intParam("t")
				if !okR || !okT || r < 0 || t < 0 {
					continue
				}
				qs = append(qs, transportQuota{
					name:      it.name,
					remaining: r,
					limit:     limits[it.name],
					reset:     time.Duration(min(t, transportMaxSeconds)) * time.Second,
				})
				if len(qs) == transportMaxQuotas {
					break
				}
			}
			if len(qs) > 0 {
				return qs
			}
		}
	}
	rem, ok := transportDeltaSeconds(strings.TrimSpace(h.Get("X-RateLimit-Remaining")))
	if !ok {
		return nil
	}
	rv := strings.TrimSpace(h.Get("X-RateLimit-Reset"))
	if rv == "" || len(rv) > 15 || strings.Trim(rv, "0123456789") != "" {
		return nil
	}
	reset, _ := strconv.ParseInt(rv, 10, 64) // at most 15 digits: cannot fail
	var d time.Duration
	if reset >= transportEpochSeconds {
		// A Unix time is whole seconds: the reset can be up to a second
		// later than written, never earlier. reset has at most 15 digits,
		// so the difference cannot overflow.
		secs := reset - date.Unix() + 1
		d = time.Duration(min(max(secs, 0), transportMaxSeconds)) * time.Second
	} else {
		d = time.Duration(min(reset, transportMaxSeconds)) * time.Second
	}
	limit, _ := transportDeltaSeconds(strings.TrimSpace(h.Get("X-RateLimit-Limit")))
	return []transportQuota{{remaining: rem, limit: limit, reset: d}}
}

// transportSFItem is one member of a Structured Field list as the RateLimit
// fields use it: a string or token naming the policy, with parameters.
// Parameters whose value is not an integer keep only their presence.
type transportSFItem struct {
	name   string
	params []transportSFParam
}

type transportSFParam struct {
	key   string
	value int64
	isInt bool
}

// intParam returns the integer parameter key, the last one if repeated
// (RFC 9651: later keys overwrite earlier ones).
func (it transportSFItem) intParam(key string) (int64, bool) {
	for i := len(it.params) - 1; i >= 0; i-- {
		if it.params[i].key == key {
			return it.params[i].value, it.params[i].isInt
		}
	}
	return 0, false
}

// transportMaxSFMembers caps the members read from one list, so that a
// hostile header costs bounded work and memory.
const transportMaxSFMembers = 16

// transportParseSFList parses the subset of an RFC 9651 list the RateLimit
// fields use: members that are strings or tokens, each with parameters whose
// values are integers, strings, tokens, byte sequences or booleans. It
// reports false when the value is not such a list (the whole field is then
// ignored, as RFC 9651 asks). Inner lists, decimals and other exotic values
// are rejected.
func transportParseSFList(s string) ([]transportSFItem, bool) {
	p := transportSFParser{s: s}
	p.skipSP()
	if p.done() {
		return nil, true
	}
	var items []transportSFItem
	for {
		it, ok := p.item()
		if !ok {
			return nil, false
		}
		if len(items) < transportMaxSFMembers {
			items = append(items, it)
		}
		p.skipOWS()
		if p.done() {
			return items, true
		}
		if p.s[p.i] != ',' {
			return nil, false
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, false // trailing comma
		}
	}
}

type transportSFParser struct {
	s string
	i int
}

func (p *transportSFParser) done() bool { return p.i >= len(p.s) }

func (p *transportSFParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *transportSFParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *transportSFParser) item() (transportSFItem, bool) {
	var it transportSFItem
	if p.done() {
		return it, false
	}
	var ok bool
	switch c := p.s[p.i]; {
	case c == '"':
		it.name, ok = p.str()
	case transportIsAlpha(c) || c == '*':
		it.name, ok = p.token()
	default:
		return it, false
	}
	if !ok {
		return it, false
	}
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return it, false
		}
		prm := transportSFParam{key: key}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if prm.value, prm.isInt, ok = p.bareValue(); !ok {
				return it, false
			}
		}
		if len(it.params) < transportMaxSFMembers {
			it.params = append(it.params, prm)
		}
	}
	return it, true
}

// bareValue parses a parameter value; it returns the value when it is an
// integer.
func (p *transportSFParser) bareValue() (int64, bool, bool) {
	if p.done() {
		return 0, false, false
	}
	switch c := p.s[p.i]; {
	case c == '-' || (c >= '0' && c <= '9'):
		n, ok := p.integer()
		return n, true, ok
	case c == '"':
		_, ok := p.str()
		return 0, false, ok
	case transportIsAlpha(c) || c == '*':
		_, ok := p.token()
		return 0, false, ok
	case c == ':':
		j := strings.IndexByte(p.s[p.i+1:], ':')
		if j < 0 {
			return 0, false, false
		}
		for _, b := range []byte(p.s[p.i+1 : p.i+1+j]) {
			if !transportIsAlpha(b) && !(b >= '0' && b <= '9') && b != '+' && b != '/' && b != '=' {
				return 0, false, false
			}
		}
		p.i += j + 2
		return 0, false, true
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return 0, false, true
		}
	}
	return 0, false, false
}

// integer parses an sf-integer: an optional minus and 1 to 15 digits.
func (p *transportSFParser) integer() (int64, bool) {
	neg := false
	if p.s[p.i] == '-' {
		neg = true
		p.i++
	}
	start := p.i
	var n int64
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if p.i-start == 15 {
			return 0, false
		}
		n = n*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	if p.i == start || (p.i < len(p.s) && p.s[p.i] == '.') {
		return 0, false // no digits, or a decimal
	}
	if neg {
		n = -n
	}
	return n, true
}

// str parses an sf-string.
func (p *transportSFParser) str() (string, bool) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return "", false
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), true
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // unterminated
}

// token parses an sf-token.
func (p *transportSFParser) token() (string, bool) {
	start := p.i
	p.i++
	for p.i < len(p.s) && transportIsTChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i], true
}

// key parses a parameter key: lower-case alpha or '*' first, then
// lower-case alphanumerics and _-.*
func (p *transportSFParser) key() (string, bool) {
	if p.done() || !((p.s[p.i] >= 'a' && p.s[p.i] <= 'z') || p.s[p.i] == '*') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '*' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i], true
}

func transportIsAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// transportIsTChar reports whether c may continue an sf-token (tchar, ':'
// and '/').
func transportIsTChar(c byte) bool {
	if transportIsAlpha(c) || (c >= '0' && c <= '9') {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}
