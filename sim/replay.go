package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

// ReplayReport is what a policy would have done to a trace.
type ReplayReport struct {
	// Records is the number of requests replayed; Reordered those whose
	// time was before the previous record's (replayed at the previous
	// time: limiters need time to move forward).
	Records, Reordered int64
	// Span is the trace time covered.
	Span time.Duration `json:"span_ns"`
	// Labelled reports that some records carry a label.
	Labelled bool
	// Policy is the whole policy's effect, rules together (penalties
	// included).
	Policy ReplayOutcome
	// Rules is each rate rule's effect alone (a rule replayed on its own,
	// without overrides, so that its figures do not depend on the others).
	Rules []RuleReplay
	// Skipped names the rules not replayed: concurrency and adaptive
	// limits depend on service times, which a trace does not hold.
	Skipped []string `json:",omitempty"`
	// EarlyWarnings counts the keys that passed half a window rule's limit
	// in the first fifth of its window (shed.WithEarlyWarning), rules
	// together.
	EarlyWarnings uint64
	// Penalized lists the keys the penalty box put in a timeout, most
	// penalized requests first (at most MaxPenalizedKeys).
	Penalized []PenalizedKey `json:",omitempty"`
}

// MaxPenalizedKeys bounds ReplayReport.Penalized.
const MaxPenalizedKeys = 50

// ReplayOutcome counts the requests a policy or a rule applied to and would
// have rejected, by label.
type ReplayOutcome struct {
	Applied, WouldReject          int64
	Legit, LegitRejected          int64
	Abusive, AbusiveRejected      int64
	RejectRate, FalsePositiveRate float64
	CatchRate                     float64 // abusive requests rejected / abusive requests
}

func (o *ReplayOutcome) count(l Label, rejected bool) {
	o.Applied++
	r := int64(0)
	if rejected {
		r = 1
	}
	o.WouldReject += r
	switch l {
	case Abusive:
		o.Abusive++
		o.AbusiveRejected += r
	default: // unlabelled requests count as legitimate
		o.Legit++
		o.LegitRejected += r
	}
}

func (o *ReplayOutcome) finish() {
	ratio := func(a, b int64) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	o.RejectRate = ratio(o.WouldReject, o.Applied)
	o.FalsePositiveRate = ratio(o.LegitRejected, o.Legit)
	o.CatchRate = ratio(o.AbusiveRejected, o.Abusive)
}

// RuleReplay is one rule's figures.
type RuleReplay struct {
	Rule, Category, Identity, Algorithm, Tier string
	// Limit is the rule's limit per Window (a token bucket's burst, over
	// the time its refill takes to fill it).
	Limit  int64
	Window time.Duration `json:"window_ns"`
	ReplayOutcome
	// Keys and LegitKeys count the keys the rule saw (a key with any
	// abusive request is not legitimate).
	Keys, LegitKeys int
	// P50, P95 and P99 are the distribution over legitimate keys of each
	// key's peak requests in one Window (aligned windows); AllP99 over
	// every key.
	P50, P95, P99, AllP99 int64
	// Recommended is a limit per Window of 2.5 to 3 times P99: 2.5 times,
	// rounded up to a step of 1, 1.2, 1.4 ... 2, 2.2, 2.5, 3, 3.5 ... 5,
	// 6 ... 10 times a power of ten; 0 without legitimate keys.
	Recommended int64
}

// PenalizedKey is a client the penalty box would have held.
type PenalizedKey struct {
	Key      string
	Abusive  bool
	Requests int64 // requests rejected by the penalty
}

// keyID identifies a client of one identity without allocating.
type keyID struct {
	ip netip.Addr
	s  string
}

type keyUse struct {
	win, count, peak int64
	abusive          bool
}

// replayRule is one rate rule replayed alone.
type replayRule struct {
	r    shed.Rule
	c    *shed.Controller
	win  int64
	keys map[keyID]*keyUse
	out  RuleReplay
}

func keyOf(id shed.Identity, rec *Record) (keyID, bool) {
	switch id {
	case shed.IP:
		return keyID{ip: rec.IP}, true
	case shed.User:
		return keyID{s: rec.User}, rec.User != ""
	case shed.APIKey:
		return keyID{s: rec.APIKey}, rec.APIKey != ""
	case shed.Tenant:
		return keyID{s: rec.Tenant}, rec.Tenant != ""
	}
	return keyID{}, true
}

func (k keyID) String(id shed.Identity) string {
	if id == shed.IP {
		return "ip:" + k.ip.String()
	}
	return id.String() + ":" + k.s
}

// Replay plays tr through p in virtual time, as fast as it can: the whole
// policy (every rule, overrides, penalties) on one controller, and each
// rate rule alone on its own. Records should be in time order.
func Replay(p *policy.Policy, tr TraceReader) (*ReplayReport, error) {
	quiet := shed.WithLogger(slog.New(slog.DiscardHandler))
	rules, err := p.Rules()
	if err != nil {
		return nil, err
	}
	tiers, def := p.Tiers()
	penID, hasPen := p.Penalties()
	rep := &ReplayReport{}
	var alone []*replayRule
	for _, r := range rules {
		if r.Algorithm == shed.Concurrency || r.Algorithm == shed.Adaptive {
			rep.Skipped = append(rep.Skipped, r.Name)
			continue
		}
		one := r
		one.Tier, one.DryRun = "", false
		c, err := shed.New([]shed.Rule{one}, quiet)
		if err != nil {
			return nil, fmt.Errorf("sim: rule %q: %w", r.Name, err)
		}
		defer c.Close()
		win := int64(r.Window)
		if r.Algorithm == shed.TokenBucket {
			win = (int64(r.Rate.Per) + r.Rate.Count - 1) / r.Rate.Count * r.Limit
		}
		alone = append(alone, &replayRule{r: r, c: c, win: win, keys: map[keyID]*keyUse{},
			out: RuleReplay{Rule: r.Name, Category: r.Category, Identity: r.Identity.String(),
				Algorithm: r.Algorithm.String(), Tier: r.Tier, Limit: r.Limit, Window: time.Duration(win)}})
	}
	penalized := map[keyID]*PenalizedKey{}
	// The middleware's resolver tells CGNAT addresses (100.64.0.0/10),
	// whose IP rules are scaled up: so does the replay.
	res, _ := fingerprint.NewResolver() // no options, no error
	ctx := context.Background()
	// Virtual time starts a day in, so that it is positive and windows
	// aligned on it behave as on a clock that has run a while.
	const base = int64(24 * time.Hour)
	var rec Record
	var t0, last int64
	var all *shed.Controller
	for {
		if err := tr.Next(&rec); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if rep.Records == 0 {
			t0 = rec.Time
			if all, err = replayController(p, t0, base, &last, quiet); err != nil {
				return nil, err
			}
			defer all.Close()
		}
		now := rec.Time - t0 + base
		if now < last {
			rep.Reordered++
			now = last
		}
		last = now
		rep.Records++
		rep.Labelled = rep.Labelled || rec.Label != Unlabelled
		cat := p.Category(rec.Method, rec.Route)
		at := shed.Attempt{Category: cat, IP: rec.IP, User: rec.User, APIKey: rec.APIKey, Tenant: rec.Tenant,
			Tier: rec.Tier, Now: now, CGNAT: cgnat(res, rec.IP)}
		d, tok, err := all.Decide(ctx, at)
		if err != nil {
			return nil, err
		}
		tok.DoneAt(now, shed.Success)
		rep.Policy.count(rec.Label, !d.Allowed)
		if hasPen && d.Kind == shed.Penalized {
			k, _ := keyOf(penID, &rec)
			pk := penalized[k]
			if pk == nil {
				pk = &PenalizedKey{Key: k.String(penID)}
				penalized[k] = pk
			}
			pk.Requests++
			pk.Abusive = pk.Abusive || rec.Label == Abusive
		}
		tier := rec.Tier
		if len(tiers) > 0 && !slices.Contains(tiers, tier) {
			tier = def
		}
		at.Tier = ""
		for _, rr := range alone {
			r := &rr.r
			if r.Category != "" && r.Category != cat || r.Tier != "" && r.Tier != tier {
				continue
			}
			k, ok := keyOf(r.Identity, &rec)
			if !ok {
				continue
			}
			d, tok, err := rr.c.Decide(ctx, at)
			if err != nil {
				return nil, err
			}
			tok.DoneAt(now, shed.Success)
			rr.out.count(rec.Label, !d.Allowed)
			u := rr.keys[k]
			if u == nil {
				u = &keyUse{win: -1}
				rr.keys[k] = u
			}
			if w := now / rr.win; w != u.win {
				u.win, u.count = w, 0
			}
			u.count++
			u.peak = max(u.peak, u.count)
			u.abusive = u.abusive || rec.Label == Abusive
		}
	}
	if all == nil {
		return nil, errors.New("sim: the trace is empty")
	}
	rep.Span = time.Duration(last - base)
	rep.EarlyWarnings = all.Stats().EarlyWarnings
	rep.Policy.finish()
	for _, rr := range alone {
		rr.finish()
		rep.Rules = append(rep.Rules, rr.out)
	}
	for _, pk := range penalized {
		rep.Penalized = append(rep.Penalized, *pk)
	}
	slices.SortFunc(rep.Penalized, func(a, b PenalizedKey) int {
		if a.Requests != b.Requests {
			return int(b.Requests - a.Requests)
		}
		if a.Key < b.Key {
			return -1
		}
		return 1
	})
	if len(rep.Penalized) > MaxPenalizedKeys {
		rep.Penalized = rep.Penalized[:MaxPenalizedKeys]
	}
	return rep, nil
}

// replayController builds the whole policy on the trace's virtual clock
// (*now), with its overrides moved onto that clock: an override is in
// force for the records before its Until, in trace time.
func replayController(p *policy.Policy, t0, base int64, now *int64, quiet shed.Option) (*shed.Controller, error) {
	rules, err := p.Rules()
	if err != nil {
		return nil, err
	}
	opts, err := p.Options()
	if err != nil {
		return nil, err
	}
	*now = base
	c, err := shed.New(rules, append(opts, quiet, shed.WithClock(func() int64 { return *now }))...)
	if err != nil {
		return nil, err
	}
	// The controller maps wall time to its clock from the wall time it
	// read at New (now, approximately) to base: shift each Until by the
	// trace's distance from the present (an error of the microseconds
	// between New and this line).
	shift := time.Since(time.Unix(0, t0))
	ov := p.Overrides()
	for i := range ov {
		ov[i].Until = ov[i].Until.Add(shift)
	}
	if err := c.SetOverrides(ov); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// cgnat reports whether a is in a carrier-grade NAT range, as the
// middleware's resolver sees it.
func cgnat(res *fingerprint.Resolver, a netip.Addr) bool {
	return a.IsValid() && res.Resolve(netip.AddrPortFrom(a, 0).String(), nil).CGNAT
}

// finish computes the rule's distribution and recommendation.
func (rr *replayRule) finish() {
	o := &rr.out
	o.finish()
	var legit, every []int64
	for _, u := range rr.keys {
		every = append(every, u.peak)
		if !u.abusive {
			legit = append(legit, u.peak)
		}
	}
	slices.Sort(legit)
	slices.Sort(every)
	o.Keys, o.LegitKeys = len(every), len(legit)
	o.P50, o.P95, o.P99 = Quantile(legit, 0.50), Quantile(legit, 0.95), Quantile(legit, 0.99)
	o.AllP99 = Quantile(every, 0.99)
	if o.P99 > 0 {
		o.Recommended = RoundUpNice(2.5 * float64(o.P99))
	}
}

// Quantile returns the nearest-rank q-quantile of sorted (0 when empty).
func Quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// niceSteps are the mantissas RoundUpNice rounds to: consecutive steps
// differ by at most 1.2x, so rounding 2.5x up stays within 3x.
var niceSteps = []float64{1, 1.2, 1.4, 1.6, 1.8, 2, 2.2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10}

// RoundUpNice rounds v (positive) up to the nearest step of niceSteps
// times a power of ten, at least 1.
func RoundUpNice(v float64) int64 {
	if v <= 1 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, s := range niceSteps {
		if n := math.Ceil(s*mag - 1e-9); n >= v {
			return int64(n)
		}
	}
	return int64(10 * mag)
}
