package promshed

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/shed"
)

// Histograms is a shed.Observer (shed.WithObserver) that keeps histograms
// of queue waits, by rule and whether the wait was admitted, and of
// decision latency, by outcome: sluice_queue_wait_duration_seconds and
// sluice_decision_duration_seconds. Observing is a few atomic adds and no
// allocation (a rule's first queue wait allocates its histograms); the
// histograms are read at scrape time. It is a prometheus.Collector; safe
// for concurrent use. Call NewHistograms.
type Histograms struct {
	decisions [4]histogram // by shed.Kind
	mu        sync.Mutex   // guards adding rules to waits
	waits     sync.Map     // rule name -> *[2]histogram (rejected, admitted)
	rules     atomic.Int64
}

// maxHistogramRules bounds the rules whose queue waits are kept (rule names
// come from the rule set, but reloads may bring new ones): the rest are not
// observed.
const maxHistogramRules = 1024

var (
	_ prometheus.Collector = (*Histograms)(nil)
	_ shed.Observer        = (*Histograms)(nil)
)

var (
	descDecisionDuration = prometheus.NewDesc("sluice_decision_duration_seconds",
		"Time from the start of a decision to its end, queue waits and store calls included, by outcome.",
		[]string{"outcome"}, nil)
	descQueueWaitDuration = prometheus.NewDesc("sluice_queue_wait_duration_seconds",
		"Time attempts waited for a permit of a Global Concurrency or Adaptive rule, by whether they got one.",
		[]string{"rule", "outcome"}, nil)
)

// decisionBounds and waitBounds are the histograms' upper bounds, in
// seconds: a microsecond to a second for decisions, a tenth of a
// millisecond to ten seconds for queue waits (the same as otelshed's).
var (
	decisionBounds = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	waitBounds = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
		0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// histogram counts observations per bucket (and past the last), with their
// sum in nanoseconds.
type histogram struct {
	buckets [20]atomic.Uint64 // at most len(bounds)+1 used
	sumNs   atomic.Int64
}

func (h *histogram) observe(bounds []float64, d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(bounds) && s > bounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNs.Add(int64(d))
}

// metric returns h as a constant histogram of desc.
func (h *histogram) metric(desc *prometheus.Desc, bounds []float64, labels ...string) (prometheus.Metric, error) {
	cum := make(map[float64]uint64, len(bounds))
	var n uint64
	for i, b := range bounds {
		n += h.buckets[i].Load()
		cum[b] = n
	}
	n += h.buckets[len(bounds)].Load()
	return prometheus.NewConstHistogram(desc, n, time.Duration(h.sumNs.Load()).Seconds(), cum, labels...)
}

// NewHistograms returns Histograms registered on reg, unless reg is nil.
// It returns reg's error when the registration fails.
func NewHistograms(reg prometheus.Registerer) (*Histograms, error) {
	h := &Histograms{}
	if reg != nil {
		if err := reg.Register(h); err != nil {
			return nil, fmt.Errorf("promshed: %w", err)
		}
	}
	return h, nil
}

// ObserveDecision records one decision's latency (shed.Observer).
func (h *Histograms) ObserveDecision(kind shed.Kind, latency time.Duration) {
	if int(kind) < len(h.decisions) && latency >= 0 {
		h.decisions[kind].observe(decisionBounds, latency)
	}
}

// ObserveQueueWait records one queue wait of rule (shed.Observer).
func (h *Histograms) ObserveQueueWait(rule string, wait time.Duration, admitted bool) {
	if wait < 0 {
		return
	}
	v, ok := h.waits.Load(rule)
	if !ok {
		h.mu.Lock()
		if v, ok = h.waits.Load(rule); !ok {
			if h.rules.Load() >= maxHistogramRules {
				h.mu.Unlock()
				return
			}
			v, _ = h.waits.LoadOrStore(rule, new([2]histogram))
			h.rules.Add(1)
		}
		h.mu.Unlock()
	}
	i := 0
	if admitted {
		i = 1
	}
	v.(*[2]histogram)[i].observe(waitBounds, wait)
}

// Describe sends the two descriptors.
func (h *Histograms) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDecisionDuration
	ch <- descQueueWaitDuration
}

// Collect sends the histograms.
func (h *Histograms) Collect(ch chan<- prometheus.Metric) {
	var errs []error
	send := func(m prometheus.Metric, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		ch <- m
	}
	for k := range h.decisions {
		send(h.decisions[k].metric(descDecisionDuration, decisionBounds, shed.Kind(k).String()))
	}
	h.waits.Range(func(rule, v any) bool {
		hs := v.(*[2]histogram)
		send(hs[0].metric(descQueueWaitDuration, waitBounds, rule.(string), "rejected"))
		send(hs[1].metric(descQueueWaitDuration, waitBounds, rule.(string), "admitted"))
		return true
	})
	if len(errs) > 0 {
		ch <- prometheus.NewInvalidMetric(descDecisionDuration, errors.Join(errs...))
	}
}
