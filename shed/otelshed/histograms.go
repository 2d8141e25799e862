package otelshed

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/shed"
)

var _ shed.Observer = (*Metrics)(nil) // pass a Metrics to shed.WithObserver

// maxCachedRules bounds the rule names whose attribute sets are kept
// ready: a rule set holds far fewer, but reloads can bring new names for
// ever. Past it, a rule's attributes are built at each observation.
const maxCachedRules = 1024

// histograms are the synchronous instruments behind Observer, with
// their attribute sets made ahead so that recording allocates nothing.
type histograms struct {
	queueWait, decision metric.Float64Histogram
	attrs               func(...attribute.KeyValue) metric.MeasurementOption // Metrics.with
	// byKind holds the options of each decision kind shed knows.
	byKind [shed.Penalized + 1][]metric.RecordOption
	// rules maps a rule name to its *ruleOptions; n counts them.
	rules sync.Map
	n     atomic.Int64
}

// ruleOptions are the options of one rule's queue waits: rejected, then
// admitted.
type ruleOptions [2][]metric.RecordOption

// decisionBounds are the bucket bounds of sluice.decision.duration, in
// seconds: from a microsecond (an in-process decision) to a second (a
// slow store and a long queue wait).
func decisionBounds() []float64 {
	return []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
}

// queueWaitBounds are the bucket bounds of sluice.queue.wait.duration, in
// seconds: from a tenth of a millisecond to ten seconds.
func queueWaitBounds() []float64 {
	return []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
		0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// create makes the histograms on meter, with attrs making the options of
// each data point's attributes, or returns the Meter's errors.
func (h *histograms) create(meter metric.Meter, attrs func(...attribute.KeyValue) metric.MeasurementOption) error {
	h.attrs = attrs
	var err1, err2 error
	h.queueWait, err1 = meter.Float64Histogram("sluice.queue.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time each queued attempt waited for a concurrency permit, by rule and by whether it got one."),
		metric.WithExplicitBucketBoundaries(queueWaitBounds()...))
	h.decision, err2 = meter.Float64Histogram("sluice.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time each decision took, queue waits and store calls included, by outcome."),
		metric.WithExplicitBucketBoundaries(decisionBounds()...))
	for k := range h.byKind {
		h.byKind[k] = []metric.RecordOption{attrs(keyOutcome.String(shed.Kind(k).String()))}
	}
	return errors.Join(err1, err2)
}

// ruleOptions returns the options of rule's queue waits, made once per
// rule name (up to maxCachedRules names).
func (h *histograms) ruleOptions(rule string) *ruleOptions {
	if o, ok := h.rules.Load(rule); ok {
		return o.(*ruleOptions)
	}
	name := keyRule.String(rule)
	o := &ruleOptions{
		{h.attrs(name, keyOutcome.String("rejected"))},
		{h.attrs(name, keyOutcome.String("admitted"))},
	}
	// The count may pass the cap by the number of racing first
	// observations; it only bounds memory.
	if h.n.Load() < maxCachedRules {
		if _, loaded := h.rules.LoadOrStore(rule, o); !loaded {
			h.n.Add(1)
		}
	}
	return o
}

// ObserveQueueWait records wait on sluice.queue.wait.duration, with the
// rule's name and sluice.outcome admitted or rejected. A negative wait (a
// clock that stepped back) is not recorded. It is safe for concurrent use,
// never blocks, and allocates nothing once the rule has been seen.
func (m *Metrics) ObserveQueueWait(rule string, wait time.Duration, admitted bool) {
	if wait < 0 {
		return
	}
	o := m.h.ruleOptions(rule)
	i := 0
	if admitted {
		i = 1
	}
	m.h.queueWait.Record(context.Background(), wait.Seconds(), o[i]...)
}

// ObserveDecision records latency on sluice.decision.duration with
// sluice.outcome the kind (admitted, over_limit, shedding, penalized). A
// negative latency, or a kind shed does not define, is not recorded. It
// is safe for concurrent use, never blocks, and allocates nothing.
func (m *Metrics) ObserveDecision(kind shed.Kind, latency time.Duration) {
	if latency < 0 || int(kind) >= len(m.h.byKind) {
		return
	}
	m.h.decision.Record(context.Background(), latency.Seconds(), m.h.byKind[kind]...)
}
