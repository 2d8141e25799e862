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
// concurrent use. The zero value is not usable; call New.
type Metrics struct {
	c   *shed.Controller
	reg metric.Registration
	in  instruments
	h   histograms

	once sync.Once // Unregister's
}

// New creates the instruments on mp's Meter named ScopeName and registers
// the callback that observes c's Stats at each collection. It never touches
// the global MeterProvider. It returns an error for a nil mp or c, and the
// Meter's errors when an instrument or the callback cannot be made (the
// Metrics is then not returned, and nothing stays registered).
//
// Call Unregister when the Controller is retired, or the provider keeps
// observing it.
func New(mp metric.MeterProvider, c *shed.Controller) (*Metrics, error) {
	if mp == nil {
		return nil, errors.New("otelshed: nil MeterProvider")
	}
	if c == nil {
		return nil, errors.New("otelshed: nil Controller")
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{c: c}
	obs, err := m.in.create(meter)
	if err == nil {
		err = m.h.create(meter)
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
	in := &m.in

	for _, k := range []struct {
		kind shed.Kind
		n    uint64
	}{{shed.Admitted, s.Admitted}, {shed.OverLimit, s.OverLimit}, {shed.Shedding, s.Shedding}, {shed.Penalized, s.Penalized}} {
		o.ObserveInt64(in.decisions, count(k.n), metric.WithAttributes(keyOutcome.String(k.kind.String())))
	}
	o.ObserveInt64(in.dryRun, count(s.DryRun))
	o.ObserveInt64(in.failedOpen, count(s.FailedOpen))
	o.ObserveInt64(in.storeErrors, count(s.StoreErrors))
	o.ObserveInt64(in.leasesLost, count(s.LeasesLost))
	o.ObserveInt64(in.inflight, s.Inflight)
	o.ObserveInt64(in.queueWaits, count(s.QueueWaits))
	o.ObserveFloat64(in.queueWaitTime, s.QueueWait.Seconds())
	o.ObserveInt64(in.queueShed, count(s.QueueShed))
	o.ObserveInt64(in.doubleDone, count(s.DoubleDone))
	o.ObserveInt64(in.panics, count(s.Panics))
	o.ObserveInt64(in.unknownPeers, count(s.UnknownPeers))
	o.ObserveInt64(in.proxyNoHeader, count(s.ProxyWithoutHeader))
	o.ObserveInt64(in.cgnat, count(s.CGNAT))
	o.ObserveInt64(in.early, count(s.EarlyWarnings))
	o.ObserveInt64(in.earlyHeld, count(s.EarlyWarningsHeld))
	o.ObserveInt64(in.strikes, count(s.Strikes))

	if s.StoreReports { // a store that can degrade, such as redisstore.Fallback
		h := s.Store
		var degraded int64
		if h.Degraded {
			degraded = 1
		}
		o.ObserveInt64(in.storeDegraded, degraded)
		o.ObserveFloat64(in.storeShare, h.Share)
		o.ObserveInt64(in.storeInstances, h.Instances)
		o.ObserveInt64(in.storeFallbacks, count(h.FallbackDecisions))
		o.ObserveInt64(in.storeBackendErrors, count(h.BackendErrors))
		o.ObserveInt64(in.storeTransitions, count(h.Trips), metric.WithAttributes(keyMode.String("degraded")))
		o.ObserveInt64(in.storeTransitions, count(h.Recoveries), metric.WithAttributes(keyMode.String("shared")))
	}
	if p := s.Penalty; p.Capacity > 0 { // a box that reports its table
		o.ObserveInt64(in.penaltyKeys, p.Entries)
		o.ObserveInt64(in.penaltyCapacity, p.Capacity)
		o.ObserveInt64(in.penaltyEvictions, count(p.Evictions))
		o.ObserveInt64(in.penaltyTimeouts, count(p.Timeouts))
	}

	for i := range s.Rules {
		r := &s.Rules[i]
		name := keyRule.String(r.Name)
		byRule := metric.WithAttributes(name)
		o.ObserveInt64(in.ruleInfo, 1, metric.WithAttributes(name, keyCategory.String(r.Category),
			keyIdentity.String(r.Identity.String()), keyAlgorithm.String(r.Algorithm.String())))
		for _, d := range []struct {
			outcome string
			n       uint64
		}{{"allowed", r.Allowed}, {"rejected", r.Rejected}, {"would_reject", r.WouldReject},
			{"fail_open", r.FailOpen}, {"fail_closed", r.FailClosed}, {"overflowed", r.Overflowed}} {
			o.ObserveInt64(in.ruleDecisions, count(d.n), metric.WithAttributes(name, keyOutcome.String(d.outcome)))
		}
		o.ObserveInt64(in.ruleLimit, r.Limit, byRule)
		if r.Identity == shed.Global && (r.Algorithm == shed.Concurrency || r.Algorithm == shed.Adaptive) {
			o.ObserveInt64(in.ruleInflight, r.Inflight, byRule)
			o.ObserveInt64(in.ruleWaiting, int64(r.Waiting), byRule)
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
