// Package statuspage serves a live status page of a shed.Controller: an
// http.Handler that shows each rule's limit, inflight permits, queue and
// decision rates, a chart of each rule's limit over the last minutes, the
// store's health and the penalty box's table, with a JSON report beside it
// for scripts.
//
// A Page is read-only unless WithActions names who may pardon a client or
// reset a client's usage: it answers GET and HEAD, and shows counters and
// rule definitions only, never a client key. It checks
// no credentials: mount it where only operators reach it (an internal
// listener, or behind the service's own authentication). Mount it on a
// subtree pattern so that both its page and its report are reached:
//
//	mux.Handle("/debug/sluice/", http.StripPrefix("/debug/sluice", page))
//
// serves the page at /debug/sluice/ and the report at /debug/sluice/json
// (any other path below is not found).
// The page is one HTML document with its style and a small script inline
// (allowed by a Content-Security-Policy that names their hashes and allows
// nothing else: no external asset, no CDN). The script polls the report
// every second and updates the numbers and charts; without script the page
// still shows the state at the time it was served.
//
// # History
//
// Rates and charts need samples of Stats taken over time. A Page keeps them
// in a bounded ring (WithHistory samples, one per WithInterval) and starts
// no goroutine. Samples are taken in two ways: every request to the page or
// its report records one when the newest is at least half an interval old,
// so that rates are fresh whenever someone looks; and Run, which the caller
// starts in a goroutine of its own and stops with its context, records one
// every interval, so that the chart covers the last minutes even while no
// one looks. Without Run, the chart shows only the instants at which the
// page was viewed, placed at their true times (gaps stay gaps). Rates are
// the change of a counter between the two newest samples, divided by the
// time between them; a rate is unknown (null in the report, "–" on the
// page) until two samples exist, and for a rule whose counters went back
// (a reload that replaced the rule, which starts its counters again).
// Stats does not say when a rule was replaced: one whose new counters have
// passed the old ones by the next sample shows, for one interval, a rate
// too low.
//
// # What the page does not show
//
// The Controller's public API offers no list of its hottest keys, no list
// of the clients in a penalty timeout, and no way to pardon or reset one
// key, so the page shows none of these: only the penalty box's counts and
// each per-key rule's table counts.
//
// Errors start with "statuspage: ".
package statuspage
