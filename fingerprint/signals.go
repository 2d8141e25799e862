package fingerprint

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// MaxDistinct is how many distinct User-Agents (and, separately, TLS
// fingerprints) a Tracker remembers per client key; one more is reported as
// MaxDistinct+1, "more than that".
const MaxDistinct = 4

// Reasons is a set of the signals that contributed to a Score.
type Reasons uint8

const (
	// ReasonManyAgents: the key presented more than one User-Agent.
	ReasonManyAgents Reasons = 1 << iota
	// ReasonNoAgent: the request carried no User-Agent.
	ReasonNoAgent
	// ReasonRegularTiming: the key's requests arrive like clockwork.
	ReasonRegularTiming
	// ReasonManyTLS: the key presented more than one TLS fingerprint.
	ReasonManyTLS
	// ReasonCaller: a caller-supplied Signal contributed.
	ReasonCaller
)

var reasonNames = [...]string{"many-agents", "no-agent", "regular-timing", "many-tls", "caller"}

// String lists the reasons joined by '|' ("" for none). It allocates.
func (r Reasons) String() string {
	var parts []string
	for i, n := range reasonNames {
		if r&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, "|")
}

// Signal is a caller-supplied suspicion signal, such as a failed CAPTCHA
// or a known-bad JA4: Value in [0, 1] is its weighted contribution.
type Signal struct {
	Name  string
	Value float64
}

// Observation is what one request tells a Tracker about its client.
type Observation struct {
	// UserAgent is the request's User-Agent header ("" when absent).
	UserAgent string
	// TLS is the connection's TLS fingerprint, typically TLSFingerprint.JA4;
	// "" when there is none (plain text), which is not counted.
	TLS string
	// Signals are caller-supplied signals for this request.
	Signals []Signal
}

// Score is a client key's suspicion and what produced it.
type Score struct {
	// Value in [0, 1] combines the weighted signals as independent
	// evidence: 1 - Π(1 - w·s).
	Value float64
	// Reasons holds each signal whose weighted contribution is positive.
	Reasons Reasons
	// Agents and TLSFingerprints count the distinct values seen for the
	// key, MaxDistinct+1 meaning more than MaxDistinct.
	Agents, TLSFingerprints int
	// Regularity in [0, 1] is 1 for arrivals at a fixed interval and 0 for
	// irregular (human) ones or too few samples.
	Regularity float64
	// Tracked is false when the table was full of live keys and this key
	// got no state; only the request's own signals were scored.
	Tracked bool
}

// Weights of the built-in signals, each in [0, 1]; 0 turns a signal off.
type Weights struct {
	ManyAgents, NoAgent, RegularTiming, ManyTLS float64
}

// DefaultWeights returns the weights a Tracker uses unless WithWeights is
// given: many agents 0.5, no agent 0.3, regular timing 0.6, many TLS
// fingerprints 0.4.
func DefaultWeights() Weights {
	return Weights{ManyAgents: 0.5, NoAgent: 0.3, RegularTiming: 0.6, ManyTLS: 0.4}
}

// ErrSignal is returned by Observe for a caller Signal whose Value is NaN
// or outside [0, 1].
var ErrSignal = errors.New("fingerprint: signal value outside [0, 1]")

// clientSignals is the per-key state: fixed-size atomics only, so a Table
// can hold it and concurrent requests of one key can update it lock-free.
type clientSignals struct {
	last       atomic.Int64  // time of the last observation; 0 = none
	intervals  atomic.Int64  // inter-arrival intervals observed
	stats      atomic.Uint64 // float32 mean and mean absolute deviation of intervals
	agents     [MaxDistinct]atomic.Uint64
	agentsOver atomic.Bool
	tls        [MaxDistinct]atomic.Uint64
	tlsOver    atomic.Bool
}

// Reset makes s fresh.
func (s *clientSignals) Reset() {
	s.last.Store(0)
	s.intervals.Store(0)
	s.stats.Store(0)
	for i := range s.agents {
		s.agents[i].Store(0)
		s.tls[i].Store(0)
	}
	s.agentsOver.Store(false)
	s.tlsOver.Store(false)
}

// Tracker keeps behavioural signals per client key in a bounded table and
// scores each observation: how many User-Agents and TLS fingerprints the
// key presents, how regular its request timing is, and what the caller
// adds. A key's state is forgotten only after it has been idle for the idle
// horizon; when the table is full of live keys, new keys are scored without
// state (Score.Tracked false) rather than evicting anyone.
//
// A Tracker is safe for concurrent use; Observe takes no lock and allocates
// nothing. Updates of one key from concurrent requests are individually
// atomic; the timing statistics are an approximation under such races. It
// has no goroutine and needs no Close. The zero value is not usable.
type Tracker struct {
	table      *concurrency.Table[clientSignals, *clientSignals]
	seed       maphash.Seed
	weights    Weights
	minSamples int64
	cv         float64
}

// TrackerOption configures NewTracker.
type TrackerOption interface {
	apply(*trackerConfig) error
}

type trackerConfig struct {
	idle       time.Duration
	weights    Weights
	minSamples int
	cv         float64
}

type trackerOptionFunc func(*trackerConfig) error

func (f trackerOptionFunc) apply(c *trackerConfig) error { return f(c) }

// WithIdle sets how long a key must go unseen before its state may be
// forgotten (default 10 minutes). d must be positive.
func WithIdle(d time.Duration) TrackerOption {
	return trackerOptionFunc(func(c *trackerConfig) error {
		if d <= 0 {
			return fmt.Errorf("fingerprint: idle horizon must be positive, got %v", d)
		}
		c.idle = d
		return nil
	})
}

// WithWeights replaces DefaultWeights(); each weight must be in [0, 1].
func WithWeights(w Weights) TrackerOption {
	return trackerOptionFunc(func(c *trackerConfig) error {
		for _, v := range []float64{w.ManyAgents, w.NoAgent, w.RegularTiming, w.ManyTLS} {
			if !(v >= 0 && v <= 1) {
				return fmt.Errorf("fingerprint: weight %v outside [0, 1]", v)
			}
		}
		c.weights = w
		return nil
	})
}

// WithTiming sets the regularity detector: scored after minSamples
// intervals (default 8, at least 2), full regularity at a coefficient of
// variation (mean absolute deviation over mean) of 0 falling linearly to
// none at cv (default 0.5; Poisson arrivals give about 0.74). cv must be
// positive and finite.
func WithTiming(minSamples int, cv float64) TrackerOption {
	return trackerOptionFunc(func(c *trackerConfig) error {
		if minSamples < 2 {
			return fmt.Errorf("fingerprint: timing needs at least 2 samples, got %d", minSamples)
		}
		if !(cv > 0) || math.IsInf(cv, 1) {
			return fmt.Errorf("fingerprint: timing cv must be positive and finite, got %v", cv)
		}
		c.minSamples, c.cv = minSamples, cv
		return nil
	})
}

// NewTracker returns a Tracker that holds state for at most capacity keys,
// preallocating about 150 bytes per key of capacity (the table's slot and
// 1.25 states). It returns an error for a non-positive capacity or a bad
// option.
func NewTracker(capacity int, opts ...TrackerOption) (*Tracker, error) {
	c := trackerConfig{idle: 10 * time.Minute, weights: DefaultWeights(), minSamples: 8, cv: 0.5}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("fingerprint: nil TrackerOption")
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	idle := int64(c.idle)
	table, err := concurrency.NewTable[clientSignals](capacity, func(s *clientSignals, now int64) bool {
		return now-s.last.Load() >= idle
	}, concurrency.WithOverflow(concurrency.OverflowReject))
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return &Tracker{table: table, seed: maphash.MakeSeed(), weights: c.weights,
		minSamples: int64(c.minSamples), cv: c.cv}, nil
}

// Observe records one request of key at now and returns the key's score.
// It returns ErrSignal, and records nothing, when a caller Signal is out of
// range.
func (t *Tracker) Observe(key string, obs Observation, now int64) (Score, error) {
	if !validSignals(obs.Signals) {
		return Score{}, ErrSignal
	}
	var sc Score
	ref, ok := t.table.Get(key, now)
	if ok {
		defer ref.Release()
		st := ref.Value()
		st.observeTiming(now)
		st.agentsOver.CompareAndSwap(false, !addToSet(&st.agents, t.hash(obs.UserAgent)))
		if obs.TLS != "" {
			st.tlsOver.CompareAndSwap(false, !addToSet(&st.tls, t.hash(obs.TLS)))
		}
		t.fill(&sc, st)
	}
	sc.Tracked = ok
	t.combine(&sc, obs.UserAgent == "", obs.Signals)
	return sc, nil
}

// Peek returns key's score from its recorded state without recording a
// request (so without the per-request no-agent and caller signals); it
// reports false when the key has no state. It never inserts.
func (t *Tracker) Peek(key string) (Score, bool) {
	sc, ok := t.read(key, false, nil)
	if !ok {
		return Score{}, false
	}
	return sc, true
}

// Score returns the score Observe would return for a request of key with
// obs, without recording it: the recorded state as it stands (obs's
// User-Agent, TLS fingerprint and timing are not added to it) with obs's
// per-request signals (no User-Agent, the caller's Signals). It never
// inserts; Tracked reports whether key has state. It returns ErrSignal
// when a caller Signal is out of range. Safe for concurrent use.
func (t *Tracker) Score(key string, obs Observation) (Score, error) {
	if !validSignals(obs.Signals) {
		return Score{}, ErrSignal
	}
	sc, _ := t.read(key, obs.UserAgent == "", obs.Signals)
	return sc, nil
}

// validSignals reports whether every caller signal is in [0, 1].
func validSignals(signals []Signal) bool {
	for _, s := range signals {
		if !(s.Value >= 0 && s.Value <= 1) {
			return false
		}
	}
	return true
}

// read is key's score from its recorded state, if any, with the
// per-request signals given; it reports whether key has state.
func (t *Tracker) read(key string, noAgent bool, signals []Signal) (Score, bool) {
	var sc Score
	ref, ok := t.table.Lookup(key)
	if ok {
		sc.Tracked = true
		t.fill(&sc, ref.Value())
		ref.Release()
	}
	t.combine(&sc, noAgent, signals)
	return sc, ok
}

// Stats returns the counters of the underlying table.
func (t *Tracker) Stats() concurrency.TableStats { return t.table.Stats() }

func (t *Tracker) hash(s string) uint64 { return maphash.String(t.seed, s) | 1 }

// fill reads the key's state into sc.
func (t *Tracker) fill(sc *Score, st *clientSignals) {
	sc.Agents = countSet(&st.agents, st.agentsOver.Load())
	sc.TLSFingerprints = countSet(&st.tls, st.tlsOver.Load())
	if st.intervals.Load() >= t.minSamples {
		mean, dev := unpackStats(st.stats.Load())
		if mean > 0 {
			sc.Regularity = max(0, 1-float64(dev/mean)/t.cv)
		} else {
			sc.Regularity = 1 // a burst of simultaneous requests, repeatedly
		}
	}
}

// combine folds the signals into sc.Value and sc.Reasons.
func (t *Tracker) combine(sc *Score, noAgent bool, signals []Signal) {
	keep := 1.0
	add := func(r Reasons, v float64) {
		if v > 0 {
			sc.Reasons |= r
			keep *= 1 - v
		}
	}
	add(ReasonManyAgents, t.weights.ManyAgents*spread(sc.Agents))
	if noAgent {
		add(ReasonNoAgent, t.weights.NoAgent)
	}
	add(ReasonRegularTiming, t.weights.RegularTiming*sc.Regularity)
	add(ReasonManyTLS, t.weights.ManyTLS*spread(sc.TLSFingerprints))
	for _, s := range signals {
		add(ReasonCaller, s.Value)
	}
	sc.Value = 1 - keep
}

// spread maps a count of distinct values to [0, 1]: 0 for one, 1 for more
// than MaxDistinct.
func spread(n int) float64 {
	if n <= 1 {
		return 0
	}
	return min(1, float64(n-1)/MaxDistinct)
}

// observeTiming folds the interval since the previous observation into the
// running mean and mean absolute deviation: a cumulative average for the
// first 8 intervals, an exponentially weighted one (1/8) after. The pair
// lives in one word so that one CAS updates both.
func (s *clientSignals) observeTiming(now int64) {
	prev := s.last.Swap(now)
	if prev == 0 {
		return
	}
	iv := float32(max(0, now-prev))
	n := s.intervals.Add(1)
	alpha := float32(1) / float32(min(n, 8))
	for {
		old := s.stats.Load()
		mean, dev := unpackStats(old)
		if n == 1 {
			mean, dev = iv, 0
		} else {
			d := iv - mean
			mean += alpha * d
			dev += alpha * (float32(math.Abs(float64(d))) - dev)
		}
		if s.stats.CompareAndSwap(old, packStats(mean, dev)) {
			return
		}
	}
}

func packStats(mean, dev float32) uint64 {
	return uint64(math.Float32bits(mean))<<32 | uint64(math.Float32bits(dev))
}

func unpackStats(w uint64) (mean, dev float32) {
	return math.Float32frombits(uint32(w >> 32)), math.Float32frombits(uint32(w))
}

// addToSet records h in set and reports whether it is (now) there; false
// means the set was full of other values. A CAS claims a free slot, so two
// requests racing with different values both find room or a full set.
func addToSet(set *[MaxDistinct]atomic.Uint64, h uint64) bool {
	for i := range set {
		v := set[i].Load()
		if v == h {
			return true
		}
		if v == 0 {
			if set[i].CompareAndSwap(0, h) || set[i].Load() == h {
				return true
			}
		}
	}
	return false
}

func countSet(set *[MaxDistinct]atomic.Uint64, over bool) int {
	n := 0
	for i := range set {
		if set[i].Load() != 0 {
			n++
		}
	}
	if over {
		n++
	}
	return n
}
