package otelshed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/shed"
)

// ScopeName is the name of the Meter the instruments are created on (the
// instrumentation scope): this package's import path.
const ScopeName = "github.com/sluicehq/sluice/shed/otelshed"

// Metrics exports a shed.Controller's Stats through OpenTelemetry
// instruments: observable counters and gauges read by one callback, once
// per collection, and the histograms of the Observer side. It is safe for
// concurrent use, and nothing in it blocks: the callback reads Stats, which
// takes no lock shared with the request path. The zero value is not
// usable; call New.
type Metrics struct {
	c   *shed.Controller
	reg metric.Registration
	in  instruments
	h   histograms
	// extra are the attributes of WithAttributes, on every data point;
	// plain is an option of them alone.
	extra []attribute.KeyValue
	plain metric.MeasurementOption

	once sync.Once // Unregister's
}

// New creates the instruments on mp's Meter named ScopeName and registers
// the callback that observes c's Stats at each collection. It never touches
// the global MeterProvider. It returns an error for a nil mp, c or Option,
// an Option's error, and the Meter's errors when an instrument or the
// callback cannot be made (the Metrics is then not returned, and no
// callback stays registered).
//
// Call Unregister when the Controller is retired, or the provider keeps
// observing it.
func New(mp metric.MeterProvider, c *shed.Controller, opts ...Option) (*Metrics, error) {
	if mp == nil {
		return nil, errors.New("otelshed: nil MeterProvider")
	}
	if c == nil {
		return nil, errors.New("otelshed: nil Controller")
	}
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("otelshed: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{c: c, extra: cfg.attrs, plain: metric.WithAttributeSet(attribute.NewSet(cfg.attrs...))}
	obs, err := m.in.create(meter)
	if err == nil {
		err = m.h.create(meter, m.with)
	}
	if err != nil {
		return nil, fmt.Errorf("otelshed: %w", err)
	}
	m.reg, err = meter.RegisterCallback(m.observe, obs...)
	if err != nil {
		return nil, fmt.Errorf("otelshed: %w", err)
	}
	return m, nil
}

// Unregister removes the callback from the provider: later collections no
// longer read the Controller. The histograms still record what they are
// given. It returns the provider's error, if any; calls after the first do
// nothing and return nil.
func (m *Metrics) Unregister() error {
	var err error
	m.once.Do(func() {
		if e := m.reg.Unregister(); e != nil {
			err = fmt.Errorf("otelshed: %w", e)
		}
	})
	return err
}

// Attribute keys. Their values come from closed lists (outcomes, modes,
// identities, algorithms) or from the rule set (rule names and
// categories); no client key is ever an attribute value.
const (
	keyOutcome   = attribute.Key("sluice.outcome")
	keyRule      = attribute.Key("sluice.rule.name")
	keyCategory  = attribute.Key("sluice.rule.category")
	keyIdentity  = attribute.Key("sluice.rule.identity")
	keyAlgorithm = attribute.Key("sluice.rule.algorithm")
	keyMode      = attribute.Key("sluice.store.mode")
	keyResult    = attribute.Key("sluice.refund.result")
)

// observe is the one callback: it takes one Stats snapshot and observes
// every instrument from it. Instruments that do not apply are left out
// rather than observed as zero, as promshed leaves them out: the store's
// health when the store does not report it, the penalty box's when it
// reports no table, a rule's inflight and queue when it is not a Global
// Concurrency or Adaptive rule, a rule's key table when the store does not
// report one.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	s := m.c.Stats()
	in, plain := &m.in, m.plain

	for _, k := range []struct {
		kind shed.Kind
		n    uint64
	}{{shed.Admitted, s.Admitted}, {shed.OverLimit, s.OverLimit}, {shed.Shedding, s.Shedding}, {shed.Penalized, s.Penalized}} {
		o.ObserveInt64(in.decisions, count(k.n), m.with(keyOutcome.String(k.kind.String())))
	}
	o.ObserveInt64(in.dryRun, count(s.DryRun), plain)
	o.ObserveInt64(in.failedOpen, count(s.FailedOpen), plain)
	o.ObserveInt64(in.storeErrors, count(s.StoreErrors), plain)
	o.ObserveInt64(in.leasesLost, count(s.LeasesLost), plain)
	o.ObserveInt64(in.inflight, s.Inflight, plain)
	o.ObserveInt64(in.queueWaits, count(s.QueueWaits), plain)
	o.ObserveFloat64(in.queueWaitTime, s.QueueWait.Seconds(), plain)
	o.ObserveInt64(in.queueShed, count(s.QueueShed), plain)
	o.ObserveInt64(in.doubleDone, count(s.DoubleDone), plain)
	o.ObserveInt64(in.panics, count(s.Panics), plain)
	o.ObserveInt64(in.unknownPeers, count(s.UnknownPeers), plain)
	o.ObserveInt64(in.proxyNoHeader, count(s.ProxyWithoutHeader), plain)
	o.ObserveInt64(in.cgnat, count(s.CGNAT), plain)
	o.ObserveInt64(in.exempt, count(s.Exempt), plain)
	o.ObserveInt64(in.tightened, count(s.Tightened), plain)
	o.ObserveInt64(in.tightenedDry, count(s.TightenedWouldReject), plain)
	o.ObserveInt64(in.peeks, count(s.Peeks), plain)
	o.ObserveInt64(in.gone, count(s.Gone), plain)
	o.ObserveInt64(in.early, count(s.EarlyWarnings), plain)
	o.ObserveInt64(in.earlyHeld, count(s.EarlyWarningsHeld), plain)
	o.ObserveInt64(in.strikes, count(s.Strikes), plain)

	if s.StoreReports { // a store that can degrade, such as a fallback.Store
		h := s.Store
		var degraded int64
		if h.Degraded {
			degraded = 1
		}
		o.ObserveInt64(in.storeDegraded, degraded, plain)
		o.ObserveFloat64(in.storeShare, h.Share, plain)
		o.ObserveInt64(in.storeInstances, h.Instances, plain)
		o.ObserveInt64(in.storeFallbacks, count(h.FallbackDecisions), plain)
		o.ObserveInt64(in.storeBackendErrors, count(h.BackendErrors), plain)
		o.ObserveInt64(in.storeTransitions, count(h.Trips), m.with(keyMode.String("degraded")))
		o.ObserveInt64(in.storeTransitions, count(h.Recoveries), m.with(keyMode.String("shared")))
	}
	if p := s.Penalty; p.Capacity > 0 { // a box that reports its table
		o.ObserveInt64(in.penaltyKeys, p.Entries, plain)
		o.ObserveInt64(in.penaltyCapacity, p.Capacity, plain)
		o.ObserveInt64(in.penaltyEvictions, count(p.Evictions), plain)
		o.ObserveInt64(in.penaltyTimeouts, count(p.Timeouts), plain)
	}

	for i := range s.Rules {
		r := &s.Rules[i]
		name := keyRule.String(r.Name)
		byRule := m.with(name)
		o.ObserveInt64(in.ruleInfo, 1, m.with(name, keyCategory.String(r.Category),
			keyIdentity.String(r.Identity.String()), keyAlgorithm.String(r.Algorithm.String())))
		for _, d := range []struct {
			outcome string
			n       uint64
		}{{"allowed", r.Allowed}, {"rejected", r.Rejected}, {"would_reject", r.WouldReject},
			{"fail_open", r.FailOpen}, {"fail_closed", r.FailClosed}, {"overflowed", r.Overflowed}, {"overflow_prefix", r.OverflowPrefix}} {
			o.ObserveInt64(in.ruleDecisions, count(d.n), m.with(name, keyOutcome.String(d.outcome)))
		}
		if r.Algorithm == shed.Adaptive {
			o.ObserveInt64(in.ruleDecisions, count(r.ShedByWait), m.with(name, keyOutcome.String("shed_by_wait")))
			if r.QueueBound > 0 {
				o.ObserveFloat64(in.ruleQueueBound, r.QueueBound.Seconds(), byRule)
			}
		}
		o.ObserveInt64(in.ruleRefunds, count(r.Refunded), m.with(name, keyResult.String("refunded")))
		o.ObserveInt64(in.ruleRefunds, count(r.RefundsLost), m.with(name, keyResult.String("lost")))
		o.ObserveInt64(in.ruleOverspent, count(r.Overspent), byRule)
		o.ObserveInt64(in.ruleLimit, r.Limit, byRule)
		if r.Identity == shed.Global && (r.Algorithm == shed.Concurrency || r.Algorithm == shed.Adaptive) {
			o.ObserveInt64(in.ruleInflight, r.Inflight, byRule)
			o.ObserveInt64(in.ruleWaiting, int64(r.Waiting), byRule)
		}
		if r.MaxWait > 0 && (r.Algorithm == shed.TokenBucket || r.Algorithm == shed.FixedWindow) { // a rule that reserves
			o.ObserveInt64(in.ruleRateWaits, count(r.Waited), m.with(name, keyOutcome.String("waited")))
			o.ObserveInt64(in.ruleRateWaits, count(r.WaitCancelled), m.with(name, keyOutcome.String("cancelled")))
			o.ObserveFloat64(in.ruleRateWaitTime, r.WaitTime.Seconds(), byRule)
			o.ObserveInt64(in.ruleRateWaiting, int64(r.Waiting), byRule)
		}
		if t := r.Table; t.Capacity > 0 { // the store reports this rule's table
			o.ObserveInt64(in.ruleKeys, t.Entries, byRule)
			o.ObserveInt64(in.ruleCapacity, t.Capacity, byRule)
			o.ObserveInt64(in.ruleEvictions, count(t.Evictions), byRule)
			o.ObserveInt64(in.ruleOverflows, count(t.Overflows), byRule)
		}
	}
	return nil
}

// with is an option of the attributes kv and the extra ones.
func (m *Metrics) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	all := make([]attribute.KeyValue, 0, len(kv)+len(m.extra))
	return metric.WithAttributes(append(append(all, kv...), m.extra...)...)
}

// count is a Stats counter as an int64 observation. Stats counters are
// sums of int64 shards, never above math.MaxInt64; a store's own uint64
// counter past it (2^63 events) is reported as math.MaxInt64 rather than
// wrapping to a negative total.
func count(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
