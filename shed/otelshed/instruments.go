package otelshed

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// instruments are the observable instruments, one per metric of the
// table in the package doc, all observed by Metrics.observe.
type instruments struct {
	decisions, dryRun, failedOpen, storeErrors, leasesLost                                                metric.Int64ObservableCounter
	queueWaits, queueShed, doubleDone, panics, gone                                                       metric.Int64ObservableCounter
	unknownPeers, proxyNoHeader, cgnat, exempt, tightened, tightenedDry, peeks, early, earlyHeld, strikes metric.Int64ObservableCounter
	queueWaitTime                                                                                         metric.Float64ObservableCounter
	inflight                                                                                              metric.Int64ObservableGauge
	storeDegraded, storeInstances                                                                         metric.Int64ObservableGauge
	storeShare                                                                                            metric.Float64ObservableGauge
	storeFallbacks, storeBackendErrors, storeTransitions                                                  metric.Int64ObservableCounter
	penaltyKeys, penaltyCapacity                                                                          metric.Int64ObservableGauge
	penaltyEvictions, penaltyTimeouts                                                                     metric.Int64ObservableCounter
	ruleInfo, ruleLimit, ruleInflight, ruleWaiting                                                        metric.Int64ObservableGauge
	ruleKeys, ruleCapacity                                                                                metric.Int64ObservableGauge
	ruleDecisions, ruleRefunds, ruleOverspent, ruleEvictions, ruleOverflows                               metric.Int64ObservableCounter
	ruleRateWaits                                                                                         metric.Int64ObservableCounter
	ruleRateWaitTime                                                                                      metric.Float64ObservableCounter
	ruleRateWaiting                                                                                       metric.Int64ObservableGauge
	ruleQueueBound                                                                                        metric.Float64ObservableGauge
}

// create makes every instrument on meter and returns them for the
// callback's registration, or the Meter's errors joined.
func (in *instruments) create(meter metric.Meter) ([]metric.Observable, error) {
	var (
		all  []metric.Observable
		errs []error
	)
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		i, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		all = append(all, i)
		return i
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		i, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		all = append(all, i)
		return i
	}

	in.decisions = counter("sluice.decisions", "{decision}",
		"Decisions of the controller by outcome: admitted, over_limit (429), shedding (503), penalized (429).")
	in.dryRun = counter("sluice.dry_run.rejections", "{attempt}",
		"Attempts admitted that a dry-run rule or penalty would have rejected.")
	in.failedOpen = counter("sluice.store.failed_open", "{attempt}",
		"Attempts admitted past their store rules because the store failed and every store rule involved fails open.")
	in.storeErrors = counter("sluice.store.errors", "{error}",
		"Store calls that failed, whatever followed.")
	in.leasesLost = counter("sluice.store.leases_lost", "{lease}",
		"Concurrency leases that expired in the store before their request finished.")
	in.inflight = gauge("sluice.inflight", "{attempt}",
		"Admitted attempts whose token is not done yet.")
	in.queueWaits = counter("sluice.queue.waits", "{attempt}",
		"Attempts that waited for a concurrency permit.")
	qwt, err := meter.Float64ObservableCounter("sluice.queue.wait.time", metric.WithUnit("s"),
		metric.WithDescription("Total time attempts spent waiting for a concurrency permit."))
	in.queueWaitTime, errs, all = qwt, append(errs, err), append(all, qwt)
	in.queueShed = counter("sluice.queue.shed", "{attempt}",
		"Waiting attempts whose wait ended in a rejection.")
	in.doubleDone = counter("sluice.token.double_done", "{call}",
		"Token.Done calls on a token already done (harmless; a bug in the caller).")
	in.panics = counter("sluice.handler.panics", "{panic}",
		"Handlers that panicked or called runtime.Goexit under the middleware (their permits were returned).")
	in.unknownPeers = counter("sluice.unknown_peers", "{request}",
		"Requests whose peer address could not be parsed; per-IP rules count them on one shared key.")
	in.proxyNoHeader = counter("sluice.proxy.without_header", "{request}",
		"Requests from a trusted proxy that sent none of the configured client headers; keyed on the proxy.")
	in.cgnat = counter("sluice.cgnat.decisions", "{decision}",
		"Per-IP rule decisions for carrier-grade NAT clients that raised the limit or deferred to a stronger identity.")
	in.exempt = counter("sluice.exempt.requests", "{request}",
		"Requests let through unlimited by an explicit exemption.")
	in.tightened = counter("sluice.tightened.decisions", "{decision}",
		"Decisions made on tightened limits, for clients whose suspicion score passed the threshold.")
	in.tightenedDry = counter("sluice.tightened.would_reject", "{decision}",
		"Admitted decisions that tightening in dry-run would have rejected.")
	in.gone = counter("sluice.gone.requests", "{request}",
		"Requests not decided nor served because their client had gone (context ended) before the decision.")
	in.peeks = counter("sluice.peeks", "{peek}",
		"Reads of rule state without a decision (Controller.Peek, PeekRequest): nothing charged, not counted as decisions.")
	in.early = counter("sluice.early_warnings", "{warning}",
		"Keys that passed half their limit in the first fifth of their window.")
	in.earlyHeld = counter("sluice.early_warnings_held", "{warning}",
		"Early warnings not passed to the hook and the log because too many came in one second.")
	in.strikes = counter("sluice.penalty.strikes", "{strike}",
		"Strikes given to the penalty box for over-limit rejections.")

	in.storeDegraded = gauge("sluice.store.degraded", "1",
		"1 while the shared store is bypassed and decisions are made locally on this instance's share, else 0.")
	share, err := meter.Float64ObservableGauge("sluice.store.share", metric.WithUnit("1"),
		metric.WithDescription("Fraction of each limit this instance enforces while the shared store is bypassed."))
	in.storeShare, errs, all = share, append(errs, err), append(all, share)
	in.storeInstances = gauge("sluice.store.instances", "{instance}",
		"Instances sharing each limit, as the store counts them.")
	in.storeFallbacks = counter("sluice.store.fallback_decisions", "{decision}",
		"Decisions made locally because the shared store was bypassed.")
	in.storeBackendErrors = counter("sluice.store.backend_errors", "{error}",
		"Calls from the store to its shared backend that failed (decisions, releases, heartbeats).")
	in.storeTransitions = counter("sluice.store.transitions", "{transition}",
		"Changes of the store's mode, to degraded (sluice.store.mode=degraded) and back (shared).")

	in.penaltyKeys = gauge("sluice.penalty.keys", "{key}",
		"Clients the penalty box holds state for.")
	in.penaltyCapacity = gauge("sluice.penalty.capacity", "{key}",
		"Most clients the penalty box can hold.")
	in.penaltyEvictions = counter("sluice.penalty.evictions", "{key}",
		"Recovered penalty entries replaced by new clients.")
	in.penaltyTimeouts = counter("sluice.penalty.timeouts", "{timeout}",
		"Penalty timeouts started.")

	in.ruleInfo = gauge("sluice.rule.info", "{rule}",
		"One series per rule, always 1, naming its category, identity and algorithm.")
	in.ruleDecisions = counter("sluice.rule.decisions", "{decision}",
		"Attempts each rule decided: allowed, rejected, would_reject (dry-run), fail_open and fail_closed (the store failed), overflowed (the key did not fit the store's full table), overflow_prefix (those of them decided on the limit of the client's network prefix).")
	in.ruleRefunds = counter("sluice.rule.refunds", "{refund}",
		"Charges given back after the work (a status the rule does not count, a lower true cost): refunded, or lost (the store could not).")
	in.ruleOverspent = counter("sluice.rule.overspent", "{attempt}",
		"Attempts whose true cost the rule could no longer charge (the quota was spent by then).")
	in.ruleLimit = gauge("sluice.rule.limit", "{cost}",
		"Limit in force: the burst or quota of a rate rule, the permits of a concurrency rule, the current limit of an adaptive rule.")
	qb, err := meter.Float64ObservableGauge("sluice.rule.queue.bound", metric.WithUnit("s"),
		metric.WithDescription("Longest wait before the decision that an adaptive rule admits now (its algorithm's queue bound); only rules that have one."))
	in.ruleQueueBound, errs, all = qb, append(errs, err), append(all, qb)
	in.ruleInflight = gauge("sluice.rule.inflight", "{cost}",
		"Permits held of a Global concurrency or adaptive rule.")
	in.ruleWaiting = gauge("sluice.rule.queue.waiting", "{attempt}",
		"Attempts waiting for a permit of a Global concurrency or adaptive rule.")
	in.ruleRateWaits = counter("sluice.rule.rate.waits", "{attempt}",
		"Attempts that waited for the slot a token-bucket rule with a max wait reserved: waited (and ran), or cancelled (the context ended first).")
	rwt, err := meter.Float64ObservableCounter("sluice.rule.rate.wait.time", metric.WithUnit("s"),
		metric.WithDescription("Total time attempts waited for the slots a token-bucket rule with a max wait reserved."))
	in.ruleRateWaitTime, errs, all = rwt, append(errs, err), append(all, rwt)
	in.ruleRateWaiting = gauge("sluice.rule.rate.waiting", "{attempt}",
		"Attempts waiting for the slot a token-bucket rule with a max wait reserved.")
	in.ruleKeys = gauge("sluice.rule.keys", "{key}",
		"Client keys the store holds for a per-key rule.")
	in.ruleCapacity = gauge("sluice.rule.capacity", "{key}",
		"Most client keys the store holds for a per-key rule.")
	in.ruleEvictions = counter("sluice.rule.evictions", "{key}",
		"Recovered keys of a per-key rule replaced by new ones.")
	in.ruleOverflows = counter("sluice.rule.overflows", "{key}",
		"New keys of a per-key rule that did not fit the store's table.")

	return all, errors.Join(errs...)
}
