package promshed

import "github.com/prometheus/client_golang/prometheus"

// The metrics, one descriptor each. The label sets are fixed: rule names
// come from the rule set, outcomes from shed's closed lists.
var (
	descDecisions = prometheus.NewDesc("sluice_decisions_total",
		"Decisions of the controller by outcome: admitted, over_limit (429), shedding (503), penalized (429).",
		[]string{"outcome"}, nil)
	descDryRun = prometheus.NewDesc("sluice_dry_run_rejections_total",
		"Attempts admitted that a dry-run rule or penalty would have rejected.", nil, nil)
	descFailedOpen = prometheus.NewDesc("sluice_store_failed_open_total",
		"Attempts admitted past their store rules because the store failed and every store rule involved fails open.", nil, nil)
	descStoreErrors = prometheus.NewDesc("sluice_store_errors_total",
		"Store calls that failed, whatever followed.", nil, nil)
	descLeasesLost = prometheus.NewDesc("sluice_store_leases_lost_total",
		"Concurrency leases that expired in the store before their request finished.", nil, nil)
	descInflight = prometheus.NewDesc("sluice_inflight_requests",
		"Admitted attempts whose token is not done yet.", nil, nil)
	descQueueWaits = prometheus.NewDesc("sluice_queue_waits_total",
		"Attempts that waited for a concurrency permit.", nil, nil)
	descQueueWaitSeconds = prometheus.NewDesc("sluice_queue_wait_seconds_total",
		"Total time attempts spent waiting for a concurrency permit.", nil, nil)
	descQueueShed = prometheus.NewDesc("sluice_queue_shed_total",
		"Waiting attempts whose wait ended in a rejection.", nil, nil)
	descDoubleDone = prometheus.NewDesc("sluice_token_double_done_total",
		"Token.Done calls on a token already done (harmless; a bug in the caller).", nil, nil)
	descPanics = prometheus.NewDesc("sluice_handler_panics_total",
		"Handlers that panicked or called runtime.Goexit under the middleware (their permits were returned).", nil, nil)
	descUnknownPeers = prometheus.NewDesc("sluice_unknown_peers_total",
		"Requests whose peer address could not be parsed; per-IP rules count them on one shared key.", nil, nil)
	descEarlyWarnings = prometheus.NewDesc("sluice_early_warnings_total",
		"Keys that passed half their limit in the first fifth of their window.", nil, nil)
	descProxyNoHeader = prometheus.NewDesc("sluice_proxy_without_header_total",
		"Requests from a trusted proxy that sent no client address header (keyed on the proxy).", nil, nil)
	descCGNAT = prometheus.NewDesc("sluice_cgnat_decisions_total",
		"Per-IP rule decisions for carrier-grade NAT clients that raised the limit or deferred to a stronger identity.", nil, nil)
	descExempt = prometheus.NewDesc("sluice_exempt_requests_total",
		"Requests let through unlimited by an explicit exemption.", nil, nil)
	descTightened = prometheus.NewDesc("sluice_tightened_decisions_total",
		"Decisions made on tightened limits, for clients whose suspicion score passed the threshold.", nil, nil)
	descTightenedWouldReject = prometheus.NewDesc("sluice_tightened_would_reject_total",
		"Admitted decisions that tightening in dry-run would have rejected.", nil, nil)
	descGone = prometheus.NewDesc("sluice_gone_requests_total",
		"Requests not decided nor served because their client had gone (context ended) before the decision.", nil, nil)
	descPeeks = prometheus.NewDesc("sluice_peeks_total",
		"Reads of rule state without a decision (Controller.Peek, PeekRequest): nothing charged, not counted as decisions.", nil, nil)
	descStrikes = prometheus.NewDesc("sluice_penalty_strikes_total",
		"Strikes given to the penalty box for over-limit rejections.", nil, nil)
	descPenaltyKeys = prometheus.NewDesc("sluice_penalty_keys",
		"Clients the penalty box holds state for.", nil, nil)
	descPenaltyCapacity = prometheus.NewDesc("sluice_penalty_keys_capacity",
		"Most clients the penalty box can hold.", nil, nil)
	descPenaltyEvictions = prometheus.NewDesc("sluice_penalty_evictions_total",
		"Recovered penalty entries replaced by new clients.", nil, nil)
	descPenaltyTimeouts = prometheus.NewDesc("sluice_penalty_timeouts_total",
		"Penalty timeouts started.", nil, nil)

	descRuleInfo = prometheus.NewDesc("sluice_rule_info",
		"One series per rule, always 1, naming its category, identity and algorithm.",
		[]string{"rule", "category", "identity", "algorithm"}, nil)
	descRuleDecisions = prometheus.NewDesc("sluice_rule_decisions_total",
		"Attempts each rule decided: allowed, rejected, would_reject (dry-run), fail_open and fail_closed (the store failed), overflowed (the key did not fit the store's full table: shed with 503, counted on the shared overflow state, or decided on its network prefix), overflow_prefix (those of them decided on the limit of the client's network prefix); for Adaptive rules, shed_by_wait (rejected because they waited past the algorithm's queue bound before the decision).",
		[]string{"rule", "outcome"}, nil)
	descRuleRefunds = prometheus.NewDesc("sluice_rule_refunds_total",
		"Charges given back after the work (a status the rule does not count, a lower true cost): refunded, or lost (the store could not).",
		[]string{"rule", "result"}, nil)
	descRuleOverspent = prometheus.NewDesc("sluice_rule_overspent_total",
		"Attempts whose true cost the rule could no longer charge (the quota was spent by then).", []string{"rule"}, nil)
	descRuleLimit = prometheus.NewDesc("sluice_rule_limit",
		"Limit in force: the burst or quota of a rate rule, the permits of a concurrency rule, the current limit of an adaptive rule.",
		[]string{"rule"}, nil)
	descRuleQueueBound = prometheus.NewDesc("sluice_rule_queue_bound_seconds",
		"Longest wait before the decision that an adaptive rule admits now (its algorithm's queue bound); only rules that have one.",
		[]string{"rule"}, nil)
	descRuleInflight = prometheus.NewDesc("sluice_rule_inflight",
		"Permits held of a Global concurrency or adaptive rule.", []string{"rule"}, nil)
	descRuleWaiting = prometheus.NewDesc("sluice_rule_queue_waiting",
		"Attempts waiting for a permit of a Global concurrency or adaptive rule.", []string{"rule"}, nil)
	descRuleRateWaits = prometheus.NewDesc("sluice_rule_rate_waits_total",
		"Attempts that waited for the slot a token-bucket rule with a max wait reserved: waited (and ran), or cancelled (the context ended first).",
		[]string{"rule", "outcome"}, nil)
	descRuleRateWaitSeconds = prometheus.NewDesc("sluice_rule_rate_wait_seconds_total",
		"Total time attempts waited for the slots a token-bucket rule with a max wait reserved.", []string{"rule"}, nil)
	descRuleRateWaiting = prometheus.NewDesc("sluice_rule_rate_waiting",
		"Attempts waiting for the slot a token-bucket rule with a max wait reserved.", []string{"rule"}, nil)
	descRuleKeys = prometheus.NewDesc("sluice_rule_keys",
		"Client keys the store holds for a per-key rule.", []string{"rule"}, nil)
	descRuleKeysCapacity = prometheus.NewDesc("sluice_rule_keys_capacity",
		"Most client keys the store holds for a per-key rule.", []string{"rule"}, nil)
	descRuleEvictions = prometheus.NewDesc("sluice_rule_evictions_total",
		"Recovered keys of a per-key rule replaced by new ones.", []string{"rule"}, nil)
	descRuleOverflows = prometheus.NewDesc("sluice_rule_overflows_total",
		"New keys of a per-key rule that did not fit the store's table.", []string{"rule"}, nil)

	descStoreDegraded = prometheus.NewDesc("sluice_store_degraded",
		"1 while the shared store is bypassed and decisions are made locally on this instance's share, else 0.", nil, nil)
	descStoreShare = prometheus.NewDesc("sluice_store_share",
		"Fraction of each limit this instance enforces while the shared store is bypassed.", nil, nil)
	descStoreInstances = prometheus.NewDesc("sluice_store_instances",
		"Instances sharing each limit, as the store counts them.", nil, nil)
	descStoreFallbacks = prometheus.NewDesc("sluice_store_fallback_decisions_total",
		"Decisions made locally because the shared store was bypassed.", nil, nil)
	descStoreBackendErrors = prometheus.NewDesc("sluice_store_backend_errors_total",
		"Calls from the store to its shared backend that failed (decisions, releases, heartbeats).", nil, nil)
	descStoreTrips = prometheus.NewDesc("sluice_store_degraded_transitions_total",
		"Changes of the store's mode, to degraded (to=\"degraded\") and back (to=\"shared\").", []string{"to"}, nil)
	allDescs = []*prometheus.Desc{
		descStoreDegraded, descStoreShare, descStoreInstances, descStoreFallbacks, descStoreBackendErrors, descStoreTrips,
		descDecisions, descDryRun, descFailedOpen, descStoreErrors, descLeasesLost, descInflight,
		descQueueWaits, descQueueWaitSeconds, descQueueShed, descDoubleDone, descPanics, descUnknownPeers, descEarlyWarnings, descProxyNoHeader, descCGNAT, descExempt, descTightened, descTightenedWouldReject, descPeeks, descGone, descStrikes,
		descPenaltyKeys, descPenaltyCapacity, descPenaltyEvictions, descPenaltyTimeouts,
		descRuleInfo, descRuleDecisions, descRuleRefunds, descRuleOverspent, descRuleLimit, descRuleQueueBound, descRuleInflight, descRuleWaiting,
		descRuleRateWaits, descRuleRateWaitSeconds, descRuleRateWaiting,
		descRuleKeys, descRuleKeysCapacity, descRuleEvictions, descRuleOverflows,
	}
)
