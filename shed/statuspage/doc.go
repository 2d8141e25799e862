// Package statuspage serves a live status page of a shed.Controller: an
// http.Handler that shows each rule's limit, inflight permits, queue and
// decision rates, a chart of each rule's limit over the last minutes, the
// store's health, the penalty box's table, the hot keys and the penalized
// clients, with a JSON report beside it for scripts.
//
// A Page is read-only unless WithActions names who may pardon a client or
// reset a client's usage: it answers GET and HEAD, and shows counters, rule
// definitions and hashed keys, never a client's key. It checks
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
// # Hot keys and penalized clients
//
// The page lists each per-key rule's most used keys, with what they have
// left and when they are whole again (shed.Controller.HotKeys), and the
// clients serving a penalty timeout (shed.Controller.Penalized), at most
// WithTopKeys of each. Both are read from the Controller's tables when the
// page or its report is served: deciding keeps nothing for them. Keys are
// hashed ("h:" and 16 hex digits), never a client's address, user, API
// key or tenant; a client's hash differs from rule to rule. A store that
// cannot list its keys (redisstore) shows a note instead. With
// WithActions each row has a button that resets the key or pardons the
// client by its hash.
//
// Errors start with "statuspage: ".
package statuspage
