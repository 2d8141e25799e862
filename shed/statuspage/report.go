package statuspage

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// Report is the state a Page shows, and the JSON document its report
// endpoint serves. Rates are per second between the two newest samples;
// a nil rate (null in JSON) is unknown (see the package doc). A Report is a
// plain value.
type Report struct {
	// IntervalSeconds is the sampling interval, and Samples the samples
	// held (at most the history's length).
	IntervalSeconds float64 `json:"interval_seconds"`
	Samples         int     `json:"samples"`
	// SpanSeconds is the time the history and the charts span: from the
	// oldest sample to the newest, at least one interval.
	SpanSeconds float64 `json:"span_seconds"`
	// Totals are the Controller's counters at the time of the report.
	Totals Totals `json:"totals"`
	// Rates are the Controller's decisions per second.
	Rates Rates `json:"rates"`
	// Store is the store's health when the store reports it
	// (store.HealthReporter); nil otherwise.
	Store *StoreReport `json:"store,omitempty"`
	// Penalty is the penalty box's table when the Controller has a box
	// that reports it (penalty.Box does); nil otherwise.
	Penalty *PenaltyReport `json:"penalty,omitempty"`
	// Rules has one entry per rule in force, in the Controller's order.
	Rules []RuleReport `json:"rules"`
	// HotKeys are each per-key rule's most used keys (shed.HotKeys, at
	// most WithTopKeys of each), by hashed key; nil (null) when the store
	// cannot list its keys (HotKeysNote says why).
	HotKeys     []HotKeyReport `json:"hot_keys"`
	HotKeysNote string         `json:"hot_keys_note,omitempty"`
	// Penalized are the clients serving a penalty timeout (shed.Penalized,
	// at most WithTopKeys), by hashed key; nil (null) without a box that
	// lists them.
	Penalized []PenalizedReport `json:"penalized"`
	// Actions says whether the page takes the pardon and reset actions
	// (WithActions).
	Actions bool `json:"actions"`
}

// HotKeyReport is one hot key of a per-key rule (see shed.HotKey).
type HotKeyReport struct {
	Rule              string  `json:"rule"`
	Key               string  `json:"key"`
	Scope             string  `json:"scope,omitempty"`
	Used              int64   `json:"used"`
	Limit             int64   `json:"limit"`
	Remaining         int64   `json:"remaining"`
	ResetAfterSeconds float64 `json:"reset_after_seconds"`
}

// PenalizedReport is one client serving a penalty timeout (see
// shed.PenalizedClient).
type PenalizedReport struct {
	Key         string  `json:"key"`
	LeftSeconds float64 `json:"left_seconds"`
	Level       int     `json:"level"`
	Strikes     int     `json:"strikes"`
}

// Totals are counters of a whole Controller (see shed.Stats).
type Totals struct {
	Admitted    uint64 `json:"admitted"`
	OverLimit   uint64 `json:"over_limit"`
	Shedding    uint64 `json:"shedding"`
	Penalized   uint64 `json:"penalized"`
	DryRun      uint64 `json:"dry_run"`
	FailedOpen  uint64 `json:"failed_open"`
	StoreErrors uint64 `json:"store_errors"`
	Inflight    int64  `json:"inflight"`
	QueueWaits  uint64 `json:"queue_waits"`
	QueueShed   uint64 `json:"queue_shed"`
	// QueueWaitSeconds is the total time attempts waited in queues.
	QueueWaitSeconds float64 `json:"queue_wait_seconds"`
}

// Rates are a Controller's decisions per second, and the mean wait of the
// attempts that went through a queue in that time.
type Rates struct {
	Admitted  *float64 `json:"admitted"`
	OverLimit *float64 `json:"over_limit"`
	Shedding  *float64 `json:"shedding"`
	Penalized *float64 `json:"penalized"`
	// QueueWaitMeanSeconds is nil also when no attempt was queued.
	QueueWaitMeanSeconds *float64 `json:"queue_wait_mean_seconds"`
}

// StoreReport is the store's health (see store.Health).
type StoreReport struct {
	Degraded          bool    `json:"degraded"`
	Instances         int64   `json:"instances"`
	Share             float64 `json:"share"`
	FallbackDecisions uint64  `json:"fallback_decisions"`
	BackendErrors     uint64  `json:"backend_errors"`
	Trips             uint64  `json:"trips"`
	Recoveries        uint64  `json:"recoveries"`
}

// PenaltyReport is the penalty box's table and counters (see
// penalty.Stats).
type PenaltyReport struct {
	Keys     int64  `json:"keys"`
	Capacity int64  `json:"capacity"`
	Strikes  uint64 `json:"strikes"`
	Timeouts uint64 `json:"timeouts"`
	// TimeoutsRate is the timeouts started per second.
	TimeoutsRate *float64 `json:"timeouts_per_second"`
}

// RuleReport is one rule's state (see shed.RuleStats).
type RuleReport struct {
	Name      string `json:"name"`
	Category  string `json:"category,omitempty"`
	Tier      string `json:"tier,omitempty"`
	Identity  string `json:"identity"`
	Algorithm string `json:"algorithm"`
	// Limit is the limit in force (an adaptive rule's current limit).
	Limit int64 `json:"limit"`
	// Concurrent says whether Inflight and Waiting apply: a Global
	// Concurrency or Adaptive rule.
	Concurrent bool  `json:"concurrent"`
	Inflight   int64 `json:"inflight"`
	Waiting    int   `json:"waiting"`
	// Decisions of the rule.
	Allowed     uint64 `json:"allowed"`
	Rejected    uint64 `json:"rejected"`
	WouldReject uint64 `json:"would_reject"`
	FailOpen    uint64 `json:"fail_open"`
	FailClosed  uint64 `json:"fail_closed"`
	Overflowed  uint64 `json:"overflowed"`
	// ShedByWait counts the rejections of an Adaptive rule for a wait
	// past its queue bound (among Rejected).
	ShedByWait uint64 `json:"shed_by_wait,omitempty"`
	// QueueBoundSeconds is an Adaptive rule's queue bound in force (see
	// shed.RuleStats.QueueBound); zero, left out, when it has none.
	QueueBoundSeconds float64 `json:"queue_bound_seconds,omitempty"`
	// AllowedRate and RejectedRate are per second.
	AllowedRate  *float64 `json:"allowed_per_second"`
	RejectedRate *float64 `json:"rejected_per_second"`
	// Keys and KeyCapacity are the store's key table of a per-key rule,
	// when the store reports one; zero otherwise.
	Keys        int64 `json:"keys,omitempty"`
	KeyCapacity int64 `json:"key_capacity,omitempty"`
	// History is the rule's samples, oldest first (null in a report
	// asked for without it).
	History []Point `json:"history"`
	// Chart is History drawn for the page's SVG.
	Chart Chart `json:"chart"`
}

// Point is one sample of a rule: its time in seconds before the report's
// newest sample (0 or negative), its limit, inflight permits and queue.
type Point struct {
	T        float64 `json:"t"`
	Limit    int64   `json:"limit"`
	Inflight int64   `json:"inflight"`
	Waiting  int     `json:"waiting"`
}

// Chart is a rule's history as the points of two SVG polylines in a
// ChartWidth by ChartHeight view box: the limit, and the inflight permits
// (empty for a rule that holds none). The x axis spans the report's
// SpanSeconds (the newest sample at the right edge), the y axis 0 to Max
// (bottom to top, within ChartMargin of the edges).
type Chart struct {
	Max      int64  `json:"max"`
	Limit    string `json:"limit"`
	Inflight string `json:"inflight"`
}

// The view box of a Chart, and the margin kept above and below its lines
// (so that a line at 0 or at Max is drawn whole).
const (
	ChartWidth  = 300
	ChartHeight = 60
	ChartMargin = 2
)

// ptr returns a pointer to v when ok, else nil.
func ptr(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}

// concurrent reports whether a rule holds permits in this process.
func concurrent(r *shed.RuleStats) bool {
	return r.Identity == shed.Global && (r.Algorithm == shed.Concurrency || r.Algorithm == shed.Adaptive)
}

// build makes the report of s, taken at the time of the newest of the
// history h (which holds at least one sample).
func build(s *shed.Stats, h *ring, interval time.Duration) Report {
	b := h.newest()
	span := max(interval, time.Duration(b.at-h.at(0).at))
	rep := Report{
		IntervalSeconds: interval.Seconds(),
		Samples:         h.n,
		SpanSeconds:     span.Seconds(),
		Totals: Totals{
			Admitted: s.Admitted, OverLimit: s.OverLimit, Shedding: s.Shedding, Penalized: s.Penalized,
			DryRun: s.DryRun, FailedOpen: s.FailedOpen, StoreErrors: s.StoreErrors, Inflight: s.Inflight,
			QueueWaits: s.QueueWaits, QueueShed: s.QueueShed, QueueWaitSeconds: s.QueueWait.Seconds(),
		},
		Rules: make([]RuleReport, len(s.Rules)),
	}
	var a *sample
	if h.n >= 2 {
		a = h.at(h.n - 2)
		rr := func(x, y uint64) *float64 { return ptr(rate(x, y, a.at, b.at)) }
		rep.Rates = Rates{
			Admitted: rr(a.admitted, b.admitted), OverLimit: rr(a.overLimit, b.overLimit),
			Shedding: rr(a.shedding, b.shedding), Penalized: rr(a.penalized, b.penalized),
		}
		if b.queueWaits > a.queueWaits && b.queueWait >= a.queueWait {
			mean := (b.queueWait - a.queueWait).Seconds() / float64(b.queueWaits-a.queueWaits)
			rep.Rates.QueueWaitMeanSeconds = &mean
		}
	}
	if s.StoreReports {
		st := s.Store
		rep.Store = &StoreReport{Degraded: st.Degraded, Instances: st.Instances, Share: st.Share,
			FallbackDecisions: st.FallbackDecisions, BackendErrors: st.BackendErrors, Trips: st.Trips, Recoveries: st.Recoveries}
	}
	if p := s.Penalty; p.Capacity > 0 {
		rep.Penalty = &PenaltyReport{Keys: p.Entries, Capacity: p.Capacity, Strikes: s.Strikes, Timeouts: p.Timeouts}
		if a != nil {
			rep.Penalty.TimeoutsRate = ptr(rate(a.timeouts, b.timeouts, a.at, b.at))
		}
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		rep.Rules[i] = RuleReport{
			Name: r.Name, Category: r.Category, Tier: r.Tier, Identity: r.Identity.String(), Algorithm: r.Algorithm.String(),
			Limit: r.Limit, Concurrent: concurrent(r), Inflight: r.Inflight, Waiting: r.Waiting,
			Allowed: r.Allowed, Rejected: r.Rejected, WouldReject: r.WouldReject,
			FailOpen: r.FailOpen, FailClosed: r.FailClosed, Overflowed: r.Overflowed, ShedByWait: r.ShedByWait,
			QueueBoundSeconds: r.QueueBound.Seconds(), Keys: r.Table.Entries, KeyCapacity: r.Table.Capacity,
		}
		rep.Rules[i].History = history(h, r.Name, i, b.at)
		if a != nil {
			if x, y := a.rule(r.Name, i), b.rule(r.Name, i); x != nil && y != nil {
				rep.Rules[i].AllowedRate = ptr(rate(x.allowed, y.allowed, a.at, b.at))
				rep.Rules[i].RejectedRate = ptr(rate(x.rejected, y.rejected, a.at, b.at))
			}
		}
		rep.Rules[i].Chart = chart(rep.Rules[i].History, span, rep.Rules[i].Concurrent)
	}
	return rep
}

// history returns the points of the rule named name (at index hint of the
// newest rules) in h, timed relative to newest.
func history(h *ring, name string, hint int, newest int64) []Point {
	pts := make([]Point, 0, h.n)
	for i := range h.n {
		s := h.at(i)
		if r := s.rule(name, hint); r != nil {
			pts = append(pts, Point{T: time.Duration(s.at - newest).Seconds(), Limit: r.limit, Inflight: r.inflight, Waiting: r.waiting})
		}
	}
	return pts
}

// chart draws pts over span: x from -span (left) to 0 (right), y from 0
// (bottom) to the largest limit or inflight count (top, at least 1).
func chart(pts []Point, span time.Duration, inflight bool) Chart {
	c := Chart{Max: 1}
	for _, p := range pts {
		c.Max = max(c.Max, p.Limit)
		if inflight {
			c.Max = max(c.Max, p.Inflight)
		}
	}
	line := func(v func(Point) int64) string {
		var b strings.Builder
		for i, p := range pts {
			if i > 0 {
				b.WriteByte(' ')
			}
			x := ChartWidth * (1 + p.T/span.Seconds())
			y := ChartMargin + (ChartHeight-2*ChartMargin)*(1-float64(v(p))/float64(c.Max))
			b.WriteString(strconv.FormatFloat(max(0, x), 'f', 1, 64))
			b.WriteByte(',')
			b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
		}
		return b.String()
	}
	c.Limit = line(func(p Point) int64 { return p.Limit })
	if inflight {
		c.Inflight = line(func(p Point) int64 { return p.Inflight })
	}
	return c
}
