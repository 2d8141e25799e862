package fingerprint

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func mustTracker(t testing.TB, capacity int, opts ...TrackerOption) *Tracker {
	t.Helper()
	tr, err := NewTracker(capacity, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func observe(t testing.TB, tr *Tracker, key string, obs Observation, now int64) Score {
	t.Helper()
	sc, err := tr.Observe(key, obs, now)
	if err != nil {
		t.Fatal(err)
	}
	if !(sc.Value >= 0 && sc.Value <= 1) {
		t.Fatalf("score %v outside [0, 1]", sc.Value)
	}
	return sc
}

const browser = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"

func TestTrackerRegularTiming(t *testing.T) {
	tr := mustTracker(t, 16)
	var bot, human Score
	rng := rand.New(rand.NewPCG(1, 2))
	now, hnow := int64(1), int64(1)
	for range 50 {
		now += int64(time.Second)
		bot = observe(t, tr, "bot", Observation{UserAgent: browser}, now)
		// Log-normal think times (median 5 s, sigma 1): bursty, as people are.
		hnow += int64(5 * float64(time.Second) * math.Exp(rng.NormFloat64()))
		human = observe(t, tr, "human", Observation{UserAgent: browser}, hnow)
	}
	if bot.Regularity < 0.99 || bot.Reasons != ReasonRegularTiming || bot.Value < 0.59 {
		t.Errorf("clockwork bot: %+v", bot)
	}
	if human.Regularity != 0 || human.Reasons != 0 || human.Value != 0 {
		t.Errorf("human: %+v", human)
	}
	// Too few samples: no verdict.
	tr2 := mustTracker(t, 4)
	for i := range 8 { // 8 observations = 7 intervals < 8
		if sc := observe(t, tr2, "k", Observation{UserAgent: browser}, int64(i+1)*1e9); sc.Regularity != 0 {
			t.Fatalf("regularity %v after %d observations", sc.Regularity, i+1)
		}
	}
}

func TestTrackerAgentsAndTLS(t *testing.T) {
	tr := mustTracker(t, 16)
	now := int64(1)
	var sc Score
	for i := range 3 {
		now += 1e9 + int64(i)*7e8
		sc = observe(t, tr, "k", Observation{UserAgent: browser, TLS: "t13d1516h2_a_b"}, now)
	}
	if sc.Agents != 1 || sc.TLSFingerprints != 1 || sc.Reasons != 0 {
		t.Fatalf("one agent: %+v", sc)
	}
	for i := range 10 {
		now += 1e9 * int64(i%3+1)
		sc = observe(t, tr, "k", Observation{UserAgent: "agent-" + strconv.Itoa(i%3), TLS: "ja4-" + strconv.Itoa(i)}, now)
	}
	if sc.Agents != MaxDistinct || sc.TLSFingerprints != MaxDistinct+1 {
		t.Fatalf("counts: %+v", sc)
	}
	if sc.Reasons&(ReasonManyAgents|ReasonManyTLS) != ReasonManyAgents|ReasonManyTLS {
		t.Fatalf("reasons: %v", sc.Reasons)
	}
	want := 1 - (1-0.5*0.75)*(1-0.4*1)*(1-0.6*sc.Regularity)
	if math.Abs(sc.Value-want) > 1e-9 {
		t.Fatalf("value %v, want %v", sc.Value, want)
	}
	if s := observe(t, tr, "k", Observation{UserAgent: "x"}, now+1); s.Agents != MaxDistinct+1 {
		t.Fatalf("fifth agent: %+v", s)
	}
}

func TestTrackerNoAgentAndCallerSignals(t *testing.T) {
	tr := mustTracker(t, 16)
	sc := observe(t, tr, "k", Observation{}, 1)
	if sc.Reasons != ReasonNoAgent || math.Abs(sc.Value-0.3) > 1e-12 {
		t.Fatalf("no agent: %+v", sc)
	}
	sc = observe(t, tr, "k2", Observation{UserAgent: browser, Signals: []Signal{{"captcha-failed", 0.5}, {"bad-asn", 0.5}}}, 1)
	if sc.Reasons != ReasonCaller || math.Abs(sc.Value-0.75) > 1e-12 {
		t.Fatalf("caller: %+v", sc)
	}
	for _, v := range []float64{math.NaN(), -0.1, 1.1, math.Inf(1)} {
		if _, err := tr.Observe("k3", Observation{Signals: []Signal{{"x", v}}}, 1); err != ErrSignal {
			t.Errorf("value %v: %v", v, err)
		}
	}
	if _, ok := tr.Peek("k3"); ok {
		t.Error("a rejected observation was recorded")
	}
	if sc, ok := tr.Peek("k"); !ok || sc.Reasons != 0 || !sc.Tracked {
		t.Errorf("peek: %+v %v", sc, ok)
	}
	if (ReasonManyAgents|ReasonCaller).String() != "many-agents|caller" || Reasons(0).String() != "" {
		t.Error("reason names")
	}
}

// TestTrackerScoreRecordsNothing: Score is the score Observe would give
// for the request's own signals (no User-Agent, the caller's) on the
// recorded state, and records nothing: no key is inserted, the recorded
// state stays as it was.
func TestTrackerScoreRecordsNothing(t *testing.T) {
	tr := mustTracker(t, 16)
	observe(t, tr, "k", Observation{UserAgent: browser}, 1)
	for range 3 {
		sc, err := tr.Score("k", Observation{})
		if err != nil || sc.Reasons != ReasonNoAgent || math.Abs(sc.Value-0.3) > 1e-12 || !sc.Tracked {
			t.Fatalf("no agent on a tracked key: %+v, %v", sc, err)
		}
		sc, err = tr.Score("new", Observation{UserAgent: browser, Signals: []Signal{{"captcha-failed", 0.5}}})
		if err != nil || sc.Reasons != ReasonCaller || math.Abs(sc.Value-0.5) > 1e-12 || sc.Tracked {
			t.Fatalf("a caller signal on a new key: %+v, %v", sc, err)
		}
	}
	if _, err := tr.Score("k", Observation{Signals: []Signal{{"x", math.NaN()}}}); err != ErrSignal {
		t.Fatalf("a NaN signal: %v", err)
	}
	if n := tr.Stats().Entries; n != 1 {
		t.Fatalf("%d keys after Score, want the 1 observed", n)
	}
	if sc, ok := tr.Peek("k"); !ok || sc.Reasons != 0 || sc.Agents != 1 {
		t.Fatalf("the recorded state after Score: %+v", sc)
	}
}

func TestTrackerBounded(t *testing.T) {
	const capacity = 64
	idle := time.Minute
	tr := mustTracker(t, capacity, WithIdle(idle))
	// The first live keys show a bot pattern; a flood of new keys follows.
	for i := range 20 {
		observe(t, tr, "bot", Observation{UserAgent: "a" + strconv.Itoa(i%5)}, int64(i+1)*1e9)
	}
	untracked := 0
	for i := range 10_000 {
		if !observe(t, tr, "flood-"+strconv.Itoa(i), Observation{UserAgent: browser}, 30e9).Tracked {
			untracked++
		}
	}
	if n := tr.Stats().Entries; n > capacity {
		t.Fatalf("%d entries over capacity %d", n, capacity)
	}
	if untracked == 0 {
		t.Fatal("a full table of live keys admitted every new key")
	}
	if sc, ok := tr.Peek("bot"); !ok || sc.Agents != MaxDistinct+1 {
		t.Fatalf("the offender was forgotten under the flood: %+v %v", sc, ok)
	}
	// After the idle horizon, new keys may replace idle ones.
	later := 30e9 + int64(idle)
	tracked := 0
	for i := range 1000 {
		if observe(t, tr, "next-"+strconv.Itoa(i), Observation{UserAgent: browser}, later).Tracked {
			tracked++
		}
	}
	if tracked == 0 || tr.Stats().Evictions == 0 {
		t.Fatal("idle keys never made room")
	}
}

func TestTrackerOptionErrors(t *testing.T) {
	bad := [][]TrackerOption{
		{WithIdle(0)},
		{WithWeights(Weights{ManyAgents: 1.5})},
		{WithWeights(Weights{NoAgent: math.NaN()})},
		{WithTiming(1, 0.5)},
		{WithTiming(8, 0)},
		{WithTiming(8, math.Inf(1))},
	}
	for i, opts := range bad {
		if _, err := NewTracker(8, opts...); err == nil {
			t.Errorf("options %d accepted", i)
		}
	}
	if _, err := NewTracker(0); err == nil {
		t.Error("zero capacity accepted")
	}
	if _, err := NewTracker(8, WithWeights(Weights{}), WithTiming(2, 2)); err != nil {
		t.Error(err)
	}
}

func TestTrackerObserveAllocatesNothing(t *testing.T) {
	tr := mustTracker(t, 16)
	obs := Observation{UserAgent: browser, TLS: "t13d1516h2_8daaf6152771_e5627efa2ab1", Signals: []Signal{{"x", 0.1}}}
	now := int64(1)
	if n := testing.AllocsPerRun(100, func() { now += 1e9; tr.Observe("k", obs, now) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestTrackerConcurrent(t *testing.T) {
	tr := mustTracker(t, 16)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				tr.Observe("shared", Observation{UserAgent: "ua-" + strconv.Itoa(g)}, int64(g*1000+i+1)*1e6)
			}
		})
	}
	wg.Wait()
	sc, ok := tr.Peek("shared")
	if !ok || sc.Agents != 4 || !(sc.Value >= 0 && sc.Value <= 1) {
		t.Fatalf("%+v", sc)
	}
}

// TestClientSignalsSize keeps NewTracker's memory statement true.
func TestClientSignalsSize(t *testing.T) {
	if per := 20 + unsafe.Sizeof(clientSignals{})*5/4; per > 150 {
		t.Fatalf("%d bytes per key of capacity, documented 150", per)
	}
}
