package promshed

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/shed"
)

// Collector is a prometheus.Collector over a shed.Controller's Stats, read
// once per scrape. It is safe for concurrent use (Stats is). The zero value
// is not usable; call New.
type Collector struct {
	c *shed.Controller
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector over c and registers it on reg, unless reg is nil
// (register it later with reg.Register). It never touches the default
// registry. It returns an error for a nil c, and reg's error when the
// registration fails (another collector already exports sluice_ metrics
// there, for instance).
func New(reg prometheus.Registerer, c *shed.Controller) (*Collector, error) {
	if c == nil {
		return nil, errors.New("promshed: nil Controller")
	}
	col := &Collector{c: c}
	if reg != nil {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("promshed: %w", err)
		}
	}
	return col, nil
}

// Describe sends the descriptors of every metric the Collector can export.
func (col *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect takes one Stats snapshot and sends its metrics. Metrics that do
// not apply are left out rather than sent as zero: the store's health when
// the store does not report it (store.HealthReporter), the penalty box's when
// the Controller has none that reports them, a rule's inflight and queue
// when it is not a Global Concurrency or Adaptive rule, a rule's key table
// when the store does not report one.
func (col *Collector) Collect(ch chan<- prometheus.Metric) {
	s := col.c.Stats()
	e := emitter{ch}

	for _, k := range []struct {
		kind shed.Kind
		n    uint64
	}{{shed.Admitted, s.Admitted}, {shed.OverLimit, s.OverLimit}, {shed.Shedding, s.Shedding}, {shed.Penalized, s.Penalized}} {
		e.counter(descDecisions, k.n, k.kind.String())
	}
	e.counter(descDryRun, s.DryRun)
	e.counter(descFailedOpen, s.FailedOpen)
	e.counter(descStoreErrors, s.StoreErrors)
	e.counter(descLeasesLost, s.LeasesLost)
	e.gauge(descInflight, float64(s.Inflight))
	e.counter(descQueueWaits, s.QueueWaits)
	e.send(descQueueWaitSeconds, prometheus.CounterValue, s.QueueWait.Seconds())
	e.counter(descQueueShed, s.QueueShed)
	e.counter(descDoubleDone, s.DoubleDone)
	e.counter(descPanics, s.Panics)
	e.counter(descUnknownPeers, s.UnknownPeers)
	e.counter(descEarlyWarnings, s.EarlyWarnings)
	e.counter(descProxyNoHeader, s.ProxyWithoutHeader)
	e.counter(descCGNAT, s.CGNAT)
	e.counter(descExempt, s.Exempt)
	e.counter(descTightened, s.Tightened)
	e.counter(descTightenedWouldReject, s.TightenedWouldReject)
	e.counter(descPeeks, s.Peeks)
	e.counter(descGone, s.Gone)
	e.counter(descStrikes, s.Strikes)
	if s.StoreReports { // a store that can degrade, such as a fallback.Store
		h := s.Store
		degraded := 0.0
		if h.Degraded {
			degraded = 1
		}
		e.gauge(descStoreDegraded, degraded)
		e.gauge(descStoreShare, h.Share)
		e.gauge(descStoreInstances, float64(h.Instances))
		e.counter(descStoreFallbacks, h.FallbackDecisions)
		e.counter(descStoreBackendErrors, h.BackendErrors)
		e.counter(descStoreTrips, h.Trips, "degraded")
		e.counter(descStoreTrips, h.Recoveries, "shared")
	}
	if p := s.Penalty; p.Capacity > 0 { // a box that reports its table
		e.gauge(descPenaltyKeys, float64(p.Entries))
		e.gauge(descPenaltyCapacity, float64(p.Capacity))
		e.counter(descPenaltyEvictions, p.Evictions)
		e.counter(descPenaltyTimeouts, p.Timeouts)
	}

	for i := range s.Rules {
		r := &s.Rules[i]
		e.gauge(descRuleInfo, 1, r.Name, r.Category, r.Identity.String(), r.Algorithm.String())
		e.counter(descRuleDecisions, r.Allowed, r.Name, "allowed")
		e.counter(descRuleDecisions, r.Rejected, r.Name, "rejected")
		e.counter(descRuleDecisions, r.WouldReject, r.Name, "would_reject")
		e.counter(descRuleDecisions, r.FailOpen, r.Name, "fail_open")
		e.counter(descRuleDecisions, r.FailClosed, r.Name, "fail_closed")
		e.counter(descRuleDecisions, r.Overflowed, r.Name, "overflowed")
		e.counter(descRuleDecisions, r.OverflowPrefix, r.Name, "overflow_prefix")
		e.counter(descRuleRefunds, r.Refunded, r.Name, "refunded")
		e.counter(descRuleRefunds, r.RefundsLost, r.Name, "lost")
		e.counter(descRuleOverspent, r.Overspent, r.Name)
		e.gauge(descRuleLimit, float64(r.Limit), r.Name)
		if r.Algorithm == shed.Adaptive {
			e.counter(descRuleDecisions, r.ShedByWait, r.Name, "shed_by_wait")
			if r.QueueBound > 0 {
				e.gauge(descRuleQueueBound, r.QueueBound.Seconds(), r.Name)
			}
		}
		if r.Identity == shed.Global && (r.Algorithm == shed.Concurrency || r.Algorithm == shed.Adaptive) {
			e.gauge(descRuleInflight, float64(r.Inflight), r.Name)
			e.gauge(descRuleWaiting, float64(r.Waiting), r.Name)
		}
		if r.MaxWait > 0 && (r.Algorithm == shed.TokenBucket || r.Algorithm == shed.FixedWindow) { // a rule that reserves
			e.counter(descRuleRateWaits, r.Waited, r.Name, "waited")
			e.counter(descRuleRateWaits, r.WaitCancelled, r.Name, "cancelled")
			e.send(descRuleRateWaitSeconds, prometheus.CounterValue, r.WaitTime.Seconds(), r.Name)
			e.gauge(descRuleRateWaiting, float64(r.Waiting), r.Name)
		}
		if t := r.Table; t.Capacity > 0 { // the store reports this rule's table
			e.gauge(descRuleKeys, float64(t.Entries), r.Name)
			e.gauge(descRuleKeysCapacity, float64(t.Capacity), r.Name)
			e.counter(descRuleEvictions, t.Evictions, r.Name)
			e.counter(descRuleOverflows, t.Overflows, r.Name)
		}
	}
}

// emitter sends const metrics, or an invalid metric carrying the error
// (which the registry reports at gather time) if one cannot be made.
type emitter struct {
	ch chan<- prometheus.Metric
}

func (e emitter) send(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.ch <- m
}

func (e emitter) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.send(d, prometheus.CounterValue, float64(v), labels...)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.send(d, prometheus.GaugeValue, v, labels...)
}
