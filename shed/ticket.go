package shed

import (
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// ticket is the pooled state of one Attempt while it is decided and run:
// its identity keys, its store request and result, and what it holds
// until its Token is done. (Decisions in decide.go; what is held and given
// back in hold.go; the public Token in token.go.)
type ticket struct {
	c *Controller
	// shard is the attempt's shard of every counter set, and ctr that
	// shard of the Controller's counters: one load and an add with no
	// bounds check count an attempt (the shards are laid out in newCounters).
	shard int
	ctr   *[nGlobal]atomic.Int64
	// semShard is the shard of the sharded semaphores the attempt takes
	// its permits from and gives them back to: one for both, whatever the
	// stack depth of Decide and Done (see permits). Tickets are numbered
	// as they are made, so that those in use at once, one a P mostly (they
	// come from a sync.Pool), are on different shards.
	semShard uint64
	// set is the rule set the attempt was decided on: what it holds is
	// given back to that set's rules even if the Controller's moved on.
	set *ruleSet
	// gen tells a live Token from a stale copy: Done moves it on once.
	// The middleware's attempts, which have no Token, leave it (see end).
	gen atomic.Uint64
	// epoch is the counter the decision entered (see Controller.enter).
	epoch int
	// began is when the decision started, for an Observer's latency.
	began int64

	ask Attempt // what was asked; cost and now below are its decided values
	// bare says that ask was never written: decidePlain read the attempt
	// in place, and put has nothing of it to clear.
	bare bool
	// tight reports that the per-key rules decide the attempt on their
	// tightened limits (a tightened attempt, tightening not in dry-run).
	tight bool
	cost  int64
	// charged is what the rate rules were charged: cost, until the work
	// says what it really cost (Token.Recost, WithActualCost).
	charged int64
	now     int64
	// buf holds the identity keys; keys are strings over it (see key), so
	// it is not written again until the attempt is done.
	buf  []byte
	keys [Tenant + 1]struct{ start, end int }
	// ckeys are the keys of Composite rules, by position in the plan's
	// per-key rules; the zero span when the attempt lacks an identity.
	ckeys [store.MaxHits]span
	// What the middleware read from the request for Composite keys
	// (readParts): the route in buf, the JA4, header values by the
	// index of the set's requestParts.headers.
	reqParts *requestParts
	route    span
	hasRoute bool
	hasJA4   bool
	ja4      string
	headers  [maxRequestHeaders]string
	// pfx holds the prefix key of an address its rule's full table had no
	// room for (OverflowPrefix), a string over it like the keys over buf.
	pfx [maxPrefixKey]byte

	req store.Request
	res store.Result
	// adj and adjRes are the store call of a recost.
	adj     store.Request
	adjRes  store.Result
	hitRule [store.MaxHits]int

	// Held until done: Global rate rules charged (given back on a later
	// rejection), Global concurrency permits, adaptive tokens, leases.
	rated []charge
	// reserved are the rated rules that reserved a later slot, and wait
	// the latest of those slots, after now: the attempt starts then (see
	// reserve.go). deadline is how long its context leaves, read once
	// (deadlineRead) by the first rule that may wait.
	reserved     []reserved
	wait         time.Duration
	deadline     time.Duration
	deadlineRead bool
	// stored says that the store admitted a.req (into a.res) and the
	// decision may still roll back (a rejection after a wait);
	// waitsStored that some hit of a.req took a waiter's place.
	stored, waitsStored bool
	sems                []int
	tokens              []adaptive.Token
	adaptives           []int // the rules of tokens
	// The first backing arrays of rated, sems, tokens and adaptives,
	// inside the ticket (see newTicket): as small allocations of their
	// own, two Ps' tickets' arrays could share a cache line, which every
	// decision writes. With them, counters shared at random and sharded
	// rates' shards picked from stacks, a Global cap's parallel Decide
	// took 72-173 ns in about one process in six, 36 ns in the others;
	// with all three gone, 36-41 ns in each of 32.
	ratedBuf    [4]charge
	semsBuf     [4]int
	tokensBuf   [2]adaptive.Token
	adaptiveBuf [2]int
	leases      []store.Lease
	active      bool

	w    statusWriter // the middleware's
	slab headerSlab   // the middleware's header values
}

// charge is a Global rate rule that an attempt charged: its index in the
// set's rules, where its rate took the units (localRate.AllowNShard), so
// that a refund gives them back there and nowhere else, and when a bucket
// had them paid off (the admission's now plus its ResetAfter), so that a
// late refund gives back only what they still weigh (localRate.RefundLate).
type charge struct {
	rule  int
	from  ratelimit.Origin
	until int64
}

// newTicket returns a fresh ticket of c, its held lists backed by its own
// arrays. Tickets are numbered as they are made, and take their counter
// shard and semShard from the number: the tickets of different Ps, made
// one after another, never share a counter shard while there are fewer
// Ps than shards (drawn at random, two Ps' tickets shared one in one
// process of sixteen, and both Ps then wrote its lines on every decision).
func (c *Controller) newTicket() *ticket {
	n := c.nTick.Add(1)
	shard := int(n % uint64(len(c.ctr.shards)))
	a := &ticket{c: c, shard: shard, ctr: (*[nGlobal]atomic.Int64)(c.ctr.shards[shard]), semShard: n, buf: make([]byte, 0, 256)}
	a.rated, a.sems, a.tokens, a.adaptives = a.ratedBuf[:0], a.semsBuf[:0], a.tokensBuf[:0], a.adaptiveBuf[:0]
	return a
}

func (c *Controller) get() *ticket { return c.pool.Get().(*ticket) }

// maxPooledBuf is the largest key buffer kept in the pool: a request with
// huge identities must not pin its buffer for the life of the process.
const maxPooledBuf = 4 << 10

// put returns a to the pool; it holds nothing.
func (c *Controller) put(a *ticket) {
	if a.bare {
		a.bare = false
	} else {
		a.clearAsk()
	}
	a.set = nil
	if len(a.buf) > 0 { // some key was built: every key's span is in buf
		a.buf = a.buf[:0]
		if cap(a.buf) > maxPooledBuf {
			a.buf = make([]byte, 0, 256)
		}
		a.keys = [Tenant + 1]struct{ start, end int }{}
	}
	if a.reqParts != nil { // readParts ran: forget the request's values
		a.reqParts, a.route, a.hasRoute, a.hasJA4, a.ja4, a.headers = nil, span{}, false, false, "", [maxRequestHeaders]string{}
	}
	if a.w.ResponseWriter != nil { // the middleware's: a store of nil costs a write barrier check
		a.w.ResponseWriter, a.w.status = nil, 0
	}
	c.pool.Put(a)
}

// clearAsk zeroes a.ask for the ticket's next attempt. Assigning a whole
// Attempt{} would make the runtime pass each of its reference words (the
// strings, the slice, the address) through the write barrier while the GC
// marks, set or not: most are never set (a middleware without WithClient
// sets the address alone), so here a reference is cleared only when it is
// set, and the other fields are plain stores.
// TestPutForgetsTheWholeAttempt holds it to every field.
func (a *ticket) clearAsk() {
	at := &a.ask
	if at.Category != "" {
		at.Category = ""
	}
	if at.IP != (netip.Addr{}) {
		at.IP = netip.Addr{}
	}
	if at.User != "" || at.APIKey != "" || at.Tenant != "" || at.Tier != "" {
		at.User, at.APIKey, at.Tenant, at.Tier = "", "", "", ""
	}
	if at.Attributes != nil {
		at.Attributes = nil
	}
	at.Cost, at.CGNAT, at.Tightened, at.reasons = 0, false, false, 0
	at.Priority, at.Weight, at.Now, at.Queued = 0, 0, 0, 0
}

// buildKey builds the store key of identity id in buf, once, and reports
// whether the attempt has that identity. keyString reads it. Small enough
// to inline: a key built already costs its callers no call.
func (a *ticket) buildKey(id Identity) bool {
	if id <= Tenant && a.keys[id].end != 0 {
		return true
	}
	return a.appendKey(id)
}

// appendKey is buildKey for a key not built yet.
func (a *ticket) appendKey(id Identity) bool {
	start := len(a.buf)
	switch id {
	case IP:
		a.buf = appendIPKey(a.buf, a.ask.IP)
	case User:
		if a.ask.User == "" {
			return false
		}
		a.buf = a.c.appendID(append(a.buf, "user:"...), a.ask.User)
	case APIKey:
		if a.ask.APIKey == "" {
			return false
		}
		a.buf = a.c.reading.hasher.AppendSumString(append(a.buf, "key:"...), a.ask.APIKey)
	case Tenant:
		if a.ask.Tenant == "" {
			return false
		}
		a.buf = a.c.appendID(append(a.buf, "tenant:"...), a.ask.Tenant)
	default:
		return false
	}
	// buf may have moved: earlier keys are re-derived by keyString from
	// the offsets, never kept across an append.
	a.keys[id].start, a.keys[id].end = start, len(a.buf)
	return true
}

// MaxIdentity is the longest user or tenant id that reaches a store key as
// given; a longer one is replaced by "#" and its keyed hash
// (fingerprint.SumLen bytes), so that a store key is at most
// MaxIdentityKey bytes whatever a caller passes.
const MaxIdentity = 64

// MaxIdentityKey bounds the store key of a user or tenant identity:
// "tenant:" and at most MaxIdentity bytes.
const MaxIdentityKey = len("tenant:") + MaxIdentity

// appendID appends id to dst as a store key's identity: as given up to
// MaxIdentity bytes, else "#" and its keyed hash. Ids that start with "#"
// are hashed whatever their length, so a kept id never equals a hash.
func (c *Controller) appendID(dst []byte, id string) []byte {
	if len(id) <= MaxIdentity && id[0] != '#' {
		return append(dst, id...)
	}
	return c.reading.hasher.AppendSumString(append(dst, '#'), id)
}

// appendIPKey appends the store key of client address ip: "ip:" and the
// address as netip.Addr.AppendTo writes it (IPv4 formatted here, octet by
// octet: the key of every request from an IPv4 client).
func appendIPKey(dst []byte, ip netip.Addr) []byte {
	if !ip.Is4() {
		dst = append(dst, "ip:"...)
		if !ip.IsValid() {
			return append(dst, "unknown"...) // no address: one shared key, named
		}
		return ip.AppendTo(dst)
	}
	o := ip.As4()
	dst = appendOctet(append(dst, "ip:"...), o[0])
	dst = appendOctet(append(dst, '.'), o[1])
	dst = appendOctet(append(dst, '.'), o[2])
	return appendOctet(append(dst, '.'), o[3])
}

// appendOctet appends x in decimal.
func appendOctet(dst []byte, x byte) []byte {
	switch {
	case x >= 100:
		r := x % 100 * 2
		return append(dst, '0'+x/100, decimalPairs[r], decimalPairs[r+1])
	case x >= 10:
		return append(dst, decimalPairs[2*x], decimalPairs[2*x+1])
	}
	return append(dst, '0'+x)
}

// keyString returns the built key of id as a string sharing buf's memory
// (unsafe.String), valid while buf is not appended to. Stores do not
// retain a request's keys (store.Store's contract), penalty boxes copy
// what they keep (Penalties), and a lease's key is used by Release before
// the attempt goes back to the pool; so the bytes never change under a
// live string, and no key is allocated.
func (a *ticket) keyString(id Identity) string {
	k := a.keys[id]
	return unsafe.String(&a.buf[k.start], k.end-k.start)
}
