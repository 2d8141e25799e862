// Package promshed exports a shed.Controller's Stats, and the Stats of
// the client side (an upstream.Transport and upstream.RetryTransport), as
// Prometheus metrics.
//
// A Collector reads (*shed.Controller).Stats at scrape time: nothing is
// added to the request path. It is registered on the prometheus.Registerer
// the caller passes, never on the default registry. Every metric name starts
// with "sluice_". Labels are the rule name, the outcome of a decision, and on
// sluice_rule_info the rule's category, identity and algorithm: all fixed by
// the rule set, so the number of series is bounded whatever the traffic. No
// client key ever becomes a label.
//
// To export several Controllers through one registry, register each
// through prometheus.WrapRegistererWith with a label that tells them apart
// ({controller="api"}, {controller="jobs"}): their metric names are the
// same.
//
// An UpstreamCollector (NewUpstream) does the same for the client side: its
// metrics are named sluice_upstream_*, its one label is the status of an
// upstream's rejection (429 or 503), and no upstream key is a label.
//
// Every metric, its type, labels and meaning, is listed in the one metric
// table in the doc of package shed/otelshed, beside its OpenTelemetry twin:
// its Prometheus column holds this package's names (sluice_decisions_total,
// sluice_rule_decisions_total{rule,outcome}, ..., sluice_upstream_*). The
// histograms of queue wait and decision latency need a per-event figure
// that Stats does not carry: Histograms records them as the Controller's
// shed.Observer (shed.WithObserver).
//
// Errors start with "promshed: ".
package promshed
