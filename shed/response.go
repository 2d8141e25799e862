package shed

import (
	"io"
	"net/http"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/internal/sfv"
	"github.com/sluicehq/sluice/ratelimit"
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
// value slices and their bytes (112 bytes). The strings point into buf;
// nothing writes to a block after it is filled. Values that do not fit (a
// long rule name, a warning, Retry-After) go to the heap as append grows
// the buffer.
type headerBlock struct {
	vals [3]string // RateLimit, X-RateLimit-Remaining, X-RateLimit-Reset
	buf  [64]byte
}

// set puts the values of b, filled for rule r, on h: RateLimit (draft),
// X-RateLimit-Limit, -Remaining and -Reset (legacy). Each slice is full,
// so that an append to one copies it.
func (b *headerBlock) set(h http.Header, draft, legacy bool, r *rule) {
	n := 0
	if draft {
		h[hRateLimit] = b.vals[:1:1]
		n++
	}
	if legacy {
		h[hXLimit] = r.limitV
		h[hXRemaining] = b.vals[n : n+1 : n+1]
		h[hXReset] = b.vals[n+1 : n+2 : n+2]
	}
}

// headerSlab hands out headerBlocks carved from one allocation of
// slabBlocks, so that the header values of a response cost an allocation
// only every slabBlocks responses. A block is never handed out twice, and
// the slab stays alive while any response still refers to one of its
// blocks. It remembers the last admission's block and the figures it
// says: the next admission that says the same (a client far from its
// limit: a full bucket, the same second) shares those values, which no
// one writes to, and costs no block at all (last keeps its rule set
// alive until the next block, across a reload too). A headerSlab is owned
// by one attempt: not safe for concurrent use. The zero value is ready.
type headerSlab struct {
	free []headerBlock
	last *headerBlock // nil until an admission filled one
	said blockFigures // what last says
}

// blockFigures is what the varying values of an admission say: the same
// figures give the same bytes.
type blockFigures struct {
	r                   *rule // its name, RateLimit prefix and limit
	fields              HeaderFields
	remaining, t, reset int64 // RateLimit's r and t; X-RateLimit-Reset (0 without legacy)
}

// slabBlocks is how many blocks one slab allocation holds (4 KiB, less 64 bytes): the
// most memory one retained header value can keep alive.
const slabBlocks = 36

// next returns a fresh block; nil s allocates one block alone.
func (s *headerSlab) next() *headerBlock {
	if s == nil {
		return new(headerBlock)
	}
	if len(s.free) == 0 {
		s.free = make([]headerBlock, slabBlocks)
	}
	b := &s.free[0]
	s.free = s.free[1:]
	return b
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
func (d Decision) WriteHeaders(h http.Header) { d.writeHeaders(h, nil) }

// writeHeaders is WriteHeaders without copying d. All values are appended
// to one buffer first and the strings taken after the last append, so
// that none of them sees the buffer move. The varying values go to a block
// from slab (a new block of their own when slab is nil), or, for an
// admission that says the same figures as slab's last, are that block's.
func (d *Decision) writeHeaders(h http.Header, slab *headerSlab) {
	p := d.plan
	if p == nil {
		return
	}
	draft, legacy := p.fields&DraftFields != 0, p.fields&LegacyFields != 0
	if draft && p.policyV != nil {
		h[hRateLimitPolicy] = p.policyV
	}
	retry := !d.Allowed && d.RetryAfter != ratelimit.Never
	if d.rule < 0 && !d.Warning && !retry {
		return
	}
	var r *rule
	var said blockFigures
	if d.rule >= 0 {
		r = &p.rules[d.rule]
		said = blockFigures{r: r, fields: p.fields, remaining: max(0, d.Remaining), t: ceilSeconds(d.Reset)}
		if legacy {
			said.reset = ceilSeconds(time.Duration(max(0, d.wall+int64(d.Reset))))
		}
		if slab != nil && !d.Warning && !retry && slab.last != nil && slab.said == said {
			slab.last.set(h, draft, legacy, r)
			return
		}
	}
	blk := slab.next()
	b := blk.buf[:0]
	// Offsets into b: the RateLimit item [0, item) holds the remaining
	// count at [rem, remEnd); then the reset time [item, reset), the
	// warning [reset, warn), Retry-After [warn, len(b)).
	var rem, remEnd, item int
	if r != nil {
		b = append(b, r.itemPrefix...)
		rem = len(b)
		b = appendDecimal(b, said.remaining)
		remEnd = len(b)
		b = append(b, ";t="...)
		b = appendDecimal(b, said.t)
		item = len(b)
		if legacy {
			b = appendDecimal(b, said.reset)
		}
	}
	reset := len(b)
	if d.Warning {
		b = append(b, "quota "...)
		b = sfv.AppendString(b, d.WarningRule)
		b = append(b, " is past its soft limit"...)
	}
	warn := len(b)
	if retry {
		b = appendDecimal(b, max(1, ceilSeconds(d.RetryAfter)))
	}
	// b no longer grows: take the strings.
	str := func(from, to int) string { return unsafe.String(&b[from], to-from) } // never empty
	if r != nil {
		n := 0
		if draft {
			blk.vals[n] = str(0, item)
			n++
		}
		if legacy {
			blk.vals[n] = str(rem, remEnd) // the r of the item: the same bytes
			blk.vals[n+1] = str(item, reset)
		}
		blk.set(h, draft, legacy, r)
		if slab != nil && !d.Warning && !retry {
			slab.last, slab.said = blk, said
		}
	}
	if d.Warning {
		h[hXWarning] = []string{str(reset, warn)}
	}
	if retry {
		h[hRetryAfter] = []string{str(warn, len(b))}
	}
}

// Problem types of the RateLimit header fields draft (RFC 9457 bodies).
const (
	problemQuota    = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	problemCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	problemAbuse    = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
)

// The problem documents of the three types, up to and without the
// closing brace, and whole (naming no policy). Their strings are
// printable ASCII without a quote or a backslash, so each is its own JSON
// string: the documents are constants (TestProblemDocumentsAreJSON).
const (
	docQuota = `{"type":"` + problemQuota + `","title":"Request quota exceeded","status":429,` +
		`"detail":"The client has used up a quota of this service; retry after the time given by Retry-After."`
	docAbuse = `{"type":"` + problemAbuse + `","title":"Abnormal usage detected","status":429,` +
		`"detail":"The client is temporarily blocked after repeated violations; retry after the time given by Retry-After."`
	docCapacity = `{"type":"` + problemCapacity + `","title":"Temporarily reduced capacity","status":503,` +
		`"detail":"The service is shedding load to protect itself; retry after the time given by Retry-After."`
	wholeQuota    = docQuota + "}\n"
	wholeAbuse    = docAbuse + "}\n"
	wholeCapacity = docCapacity + "}\n"
)

// problemDoc returns the problem document of a rejection of kind k: its
// start (for a document that names a policy) and the whole constant one.
// A kind that is no rejection (Admitted) gets the 503's.
func problemDoc(k Kind) (start, whole string) {
	switch k {
	case OverLimit:
		return docQuota, wholeQuota
	case Penalized:
		return docAbuse, wholeAbuse
	}
	return docCapacity, wholeCapacity
}

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
	if d.Kind == OverLimit && d.plan != nil && d.rule >= 0 && d.plan.rules[d.rule].Name == d.Rule {
		w.WriteHeader(d.Kind.StatusCode())
		_, _ = w.Write(d.plan.rules[d.rule].problem)
		return
	}
	_, whole := problemDoc(d.Kind)
	w.WriteHeader(d.Kind.StatusCode())
	_, _ = io.WriteString(w, whole)
}

// problemBody returns the problem document of a rejection of kind
// k naming policy (a rule name, printable ASCII).
func problemBody(k Kind, policy string) []byte {
	start, _ := problemDoc(k)
	b := append([]byte(start), `,"violated-policies":[`...)
	// policy is printable ASCII, for which a JSON string and a
	// Structured Field String escape alike (see sfv.AppendString).
	b = sfv.AppendString(b, policy)
	return append(b, "]}\n"...)
}
