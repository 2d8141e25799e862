package promshed

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/upstream"
)

// UpstreamCollector is a prometheus.Collector over the Stats of an
// upstream.Transport and the RetryStats of an upstream.RetryTransport, read
// once per scrape. It is safe for concurrent use (Stats is). The zero value
// is not usable; call NewUpstream.
type UpstreamCollector struct {
	t *upstream.Transport
	r *upstream.RetryTransport
}

var _ prometheus.Collector = (*UpstreamCollector)(nil)

// NewUpstream returns a Collector over t and r, either of which may be nil
// (its metrics are then left out), and registers it on reg, unless reg is
// nil (register it later with reg.Register). It never touches the default
// registry. Its metric names differ from the Controller Collector's, so
// both can share a registry; to export several Transports through one,
// register each through prometheus.WrapRegistererWith with a label that
// tells them apart ({upstream="payments"}). It returns an error when t and
// r are both nil, and reg's error when the registration fails.
func NewUpstream(reg prometheus.Registerer, t *upstream.Transport, r *upstream.RetryTransport) (*UpstreamCollector, error) {
	if t == nil && r == nil {
		return nil, errors.New("promshed: NewUpstream needs a Transport or a RetryTransport")
	}
	col := &UpstreamCollector{t: t, r: r}
	if reg != nil {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("promshed: %w", err)
		}
	}
	return col, nil
}

// Describe sends the descriptors of the metrics the collector exports:
// the Transport's when it has one, the RetryTransport's when it has one.
func (col *UpstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	if col.t != nil {
		for _, d := range transportDescs {
			ch <- d
		}
	}
	if col.r != nil {
		for _, d := range retryDescs {
			ch <- d
		}
	}
}

// Collect takes one Stats snapshot of each transport and sends its
// metrics.
func (col *UpstreamCollector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch}
	count := func(d *prometheus.Desc, v int64, labels ...string) {
		e.send(d, prometheus.CounterValue, float64(v), labels...)
	}
	if col.t != nil {
		s := col.t.Stats()
		count(descUpRequests, s.Requests)
		count(descUpSent, s.Sent)
		count(descUpDelayed, s.Delayed)
		e.send(descUpWaitSeconds, prometheus.CounterValue, s.Waited.Seconds())
		count(descUpThrottled, s.Throttled)
		count(descUpFailedFast, s.FailedFast)
		count(descUpRejections, s.Got429, "429")
		count(descUpRejections, s.Got503, "503")
	}
	if col.r != nil {
		s := col.r.Stats()
		count(descRetryRequests, s.Requests)
		count(descRetryAttempts, s.Attempts)
		count(descRetries, s.Retries)
		count(descRetriesDenied, s.Denied)
	}
}

// The metrics of the client side. The one label, status, takes two fixed
// values; no upstream key ever becomes a label.
var (
	descUpRequests = prometheus.NewDesc("sluice_upstream_requests_total",
		"Requests given to the upstream Transport.", nil, nil)
	descUpSent = prometheus.NewDesc("sluice_upstream_sent_total",
		"Requests the Transport passed on to the upstream.", nil, nil)
	descUpDelayed = prometheus.NewDesc("sluice_upstream_delayed_total",
		"Sent requests that waited for their turn (pacing, Retry-After, an exhausted quota, the concurrency cap).", nil, nil)
	descUpWaitSeconds = prometheus.NewDesc("sluice_upstream_wait_seconds_total",
		"Total time sent requests waited for their turn.", nil, nil)
	descUpThrottled = prometheus.NewDesc("sluice_upstream_throttled_total",
		"Requests rejected locally by adaptive throttling, because the upstream rejected much of what was sent.", nil, nil)
	descUpFailedFast = prometheus.NewDesc("sluice_upstream_failed_fast_total",
		"Requests failed without being sent, because their turn fell after their deadline or beyond the max wait.", nil, nil)
	descUpRejections = prometheus.NewDesc("sluice_upstream_rejections_total",
		"Responses of the upstream that rejected a request, by status: 429 or 503.", []string{"status"}, nil)
	transportDescs = []*prometheus.Desc{
		descUpRequests, descUpSent, descUpDelayed, descUpWaitSeconds, descUpThrottled, descUpFailedFast, descUpRejections,
	}

	descRetryRequests = prometheus.NewDesc("sluice_upstream_retry_requests_total",
		"Requests given to the RetryTransport.", nil, nil)
	descRetryAttempts = prometheus.NewDesc("sluice_upstream_retry_attempts_total",
		"Attempts the RetryTransport made: first attempts and retries.", nil, nil)
	descRetries = prometheus.NewDesc("sluice_upstream_retries_total",
		"Retries the RetryTransport made.", nil, nil)
	descRetriesDenied = prometheus.NewDesc("sluice_upstream_retries_denied_total",
		"Retries the retry budget refused.", nil, nil)
	retryDescs = []*prometheus.Desc{descRetryRequests, descRetryAttempts, descRetries, descRetriesDenied}
)
