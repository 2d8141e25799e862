package adaptive

import (
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const ms = time.Millisecond

// win builds a window of count successes at latency rtt with maxInflight,
// 100ms long.
func win(count, drops int, rtt time.Duration, maxInflight int) Window {
	return Window{Start: 0, End: int64(100 * ms), Count: count, Drops: drops,
		RTT: rtt, MinRTT: rtt, MeanRTT: rtt, MaxInflight: maxInflight}
}

func TestAIMDRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Window
		want int
	}{
		{"grows when inflight*2 >= L", win(10, 0, 10*ms, 50), 101},
		{"holds when inflight*2 < L", win(10, 0, 10*ms, 49), 100},
		{"backs off on a drop", win(10, 1, 10*ms, 100), 90},
		{"backs off above the timeout", win(10, 0, 2*time.Second, 100), 90},
		{"holds on an empty window", win(0, 0, 0, 100), 100},
	} {
		a, err := NewAIMD(WithLimits(1, 200), WithInitialLimit(100), WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Update(tc.w); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func newTestVegas(t *testing.T, slowStart bool) *Vegas {
	v, err := NewVegas(WithLimits(1, 1000), WithInitialLimit(100))
	if err != nil {
		t.Fatal(err)
	}
	v.noload, v.slowStart, v.probeAt = 10*ms, slowStart, math.MaxInt
	return v
}

func TestVegasRules(t *testing.T) {
	// L=100: log10 = 2, alpha = 6, beta = 12, threshold = 2; noload 10ms.
	for _, tc := range []struct {
		name      string
		slowStart bool
		w         Window
		want      int
	}{
		{"queue 0 <= threshold: L+beta", false, win(10, 0, 10*ms, 100), 112},
		{"slow start doubles", true, win(10, 0, 10*ms, 100), 200},
		{"queue 3 < alpha: L+log10(L)", false, win(10, 0, 10300*time.Microsecond, 100), 102},
		{"queue 8 in [alpha, beta]: hold", false, win(10, 0, 10800*time.Microsecond, 100), 100},
		{"queue 17 > beta: L-log10(L)", false, win(10, 0, 12*ms, 100), 98},
		{"drop: L-log10(L)", true, win(10, 1, 10*ms, 100), 98},
		{"inflight under L/2: hold", false, win(10, 0, 10*ms, 49), 100},
	} {
		v := newTestVegas(t, tc.slowStart)
		if got := v.Update(tc.w); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestVegasRecoversFromOne(t *testing.T) {
	v, err := NewVegas(WithLimits(1, 1000), WithInitialLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	v.Update(win(10, 0, 10*ms, 1))
	if v.Limit() <= 1 {
		t.Fatalf("Vegas stuck at %d after an idle window at limit 1", v.Limit())
	}
}

func TestVegasReprobesNoload(t *testing.T) {
	v := newTestVegas(t, false)
	v.probeAt = 15
	v.Update(win(10, 0, 20*ms, 0)) // 10 samples: not yet
	if v.noload != 10*ms {
		t.Fatalf("noload changed before the probe: %v", v.noload)
	}
	v.Update(win(10, 0, 20*ms, 0)) // 20 samples: probe
	if v.noload != 20*ms {
		t.Fatalf("noload after the probe = %v, want 20ms", v.noload)
	}
}

func newTestGradient2(t *testing.T) *Gradient2 {
	g, err := NewGradient2(WithInitialLimit(100))
	if err != nil {
		t.Fatal(err)
	}
	g.longRtt, g.warm = float64(10*ms), gradient2Warmup
	return g
}

func TestGradient2Rules(t *testing.T) {
	// L = 0.8*L + 0.2*(L*g + allowance), g = clamp(1.5*long/short, 0.5, 1).
	long20 := float64(10*ms) + float64(10*ms)*2/601
	long4 := (float64(10*ms) - float64(6*ms)*2/601) * 0.95
	for _, tc := range []struct {
		name string
		w    Window
		want float64
	}{
		{"at baseline: +queueSize", win(10, 0, 10*ms, 100), 80 + 0.2*104},
		{"twice the baseline: gradient", win(10, 0, 20*ms, 100), 80 + 0.2*100*1.5*long20/float64(20*ms)},
		{"mild overload: hold (fix for unbounded growth)", win(10, 0, 12*ms, 100), 100},
		{"drop: gradient 0.5 (fix: drops are a signal)", win(0, 1, 0, 100), 90},
		{"inflight under L/2: hold", win(10, 0, 20*ms, 49), 100},
		{"long/short > 2 decays long", win(10, 0, 4*ms, 100), 80 + 0.2*104},
	} {
		g := newTestGradient2(t)
		g.Update(tc.w)
		if math.Abs(g.limit-tc.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", tc.name, g.limit, tc.want)
		}
		if tc.name == "long/short > 2 decays long" && math.Abs(g.longRtt-long4) > 1 {
			t.Errorf("longRtt = %v, want %v", g.longRtt, long4)
		}
	}
}

func TestGradient2MildOverloadIsBounded(t *testing.T) {
	g := newTestGradient2(t)
	for range 1000 {
		g.Update(win(10, 0, 13*ms, g.Limit()))
	}
	if g.Limit() > 100 {
		t.Fatalf("limit grew to %d under mild overload", g.Limit())
	}
}

func TestGradient2WarmupAverages(t *testing.T) {
	g, _ := NewGradient2()
	g.Update(win(10, 0, 10*ms, 0))
	g.Update(win(10, 0, 20*ms, 0))
	if got := time.Duration(g.longRtt); got != 15*ms {
		t.Fatalf("warm-up longRtt = %v, want the mean 15ms", got)
	}
}

func newTestDefault(t *testing.T, opts ...Option) *Default {
	d, err := NewDefault(append([]Option{WithInitialLimit(100)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDefaultSlowStartThenAcceleratingGrowth(t *testing.T) {
	d := newTestDefault(t)
	if got := d.Update(win(100, 0, 10*ms, 100)); got != 200 {
		t.Fatalf("slow start: got %d, want 200", got)
	}
	d.slowStart, d.streak = false, 0 // as after a first congestion signal
	for _, want := range []int{201, 203, 207, 215} {
		if got := d.Update(win(100, 0, 10*ms, d.Limit())); got != want {
			t.Fatalf("growth: got %d, want %d", got, want)
		}
	}
	if got := d.Update(win(100, 0, 10*ms, d.Limit()/2)); got != 215 {
		t.Fatalf("inflight at half the limit: got %d, want 215 held", got)
	}
	if got := d.Update(win(100, 0, 10*ms, d.Limit())); got != 216 {
		t.Fatalf("growth after a hold restarts at +1: got %d, want 216", got)
	}
}

func TestDefaultDropsShrink(t *testing.T) {
	d := newTestDefault(t)
	if got := d.Update(win(80, 20, 10*ms, 100)); got != 80 {
		t.Fatalf("20%% drops: got %d, want 80", got)
	}
	if got := d.Update(win(20, 80, 10*ms, 80)); got != 56 {
		t.Fatalf("80%% drops: got %d, want 56 (at most 30%% per window)", got)
	}
	if got := d.Update(win(99, 1, 10*ms, 10)); got != 56 {
		t.Fatalf("1%% drops (within the tolerance) changed the limit to %d", got)
	}
}

func TestDefaultCeiling(t *testing.T) {
	d := newTestDefault(t, WithMaxHealthyLatency(20*ms))
	d.Update(win(100, 0, 10*ms, 100)) // baseline 10ms
	if got := d.Update(win(100, 0, 25*ms, 200)); got != 160 {
		t.Fatalf("latency 1.25 times the ceiling: got %d, want 160", got)
	}
	if got := d.Update(win(100, 0, 100*ms, 160)); got != 112 {
		t.Fatalf("latency 5 times the ceiling: got %d, want 112 (at most 30%%)", got)
	}
}

func TestDefaultQueueingShrinksByTheGradient(t *testing.T) {
	for _, tc := range []struct {
		rtt  time.Duration
		want int
	}{
		{14 * ms, 95}, // g = 12.5/14 = 0.89: halfway, 101*(1+g)/2
		{30 * ms, 70}, // g = 12.5/30 = 0.42: L*g = 42, but at most 30% a window
		{20 * ms, 82}, // g = 0.625: halfway, 101*0.8125
	} {
		d := newTestDefault(t)
		d.slowStart = false
		d.Update(win(100, 0, 10*ms, 100)) // baseline 10ms, grows to 101
		if got := d.Update(win(100, 0, tc.rtt, 101)); got != tc.want {
			t.Errorf("latency %v: got %d, want %d", tc.rtt, got, tc.want)
		}
	}
}

func TestDefaultThroughputEvidence(t *testing.T) {
	d := newTestDefault(t)
	d.slowStart = false
	// 1000 req/s at 10ms: 10 inflight on average.
	d.Update(Window{End: int64(100 * ms), Count: 100, RTT: 10 * ms, MeanRTT: 10 * ms, MaxInflight: 100})
	// Inflight 12 (+20%): throughput 1000 -> 1000, latency within tolerance.
	// Then inflight 16 (+33% over 12) with no more throughput: queueing.
	d.Update(Window{End: int64(100 * ms), Count: 100, RTT: 12 * ms, MeanRTT: 12 * ms, MaxInflight: 101})
	before := d.Limit()
	got := d.Update(Window{End: int64(100 * ms), Count: 100, RTT: 12 * ms, MeanRTT: 16 * ms, MaxInflight: before})
	if got >= before {
		t.Fatalf("more inflight without more throughput grew the limit %d -> %d", before, got)
	}
}

func TestDefaultResetsDriftedBaseline(t *testing.T) {
	d := newTestDefault(t)
	d.slowStart = false
	d.Update(win(100, 0, 10*ms, 100)) // baseline 10ms
	// A slow dependency: latency 30ms whatever the limit, throughput
	// proportional to the limit (no queue).
	for i := range 10 {
		L := d.Limit()
		w := Window{End: int64(100 * ms), Count: L * 100 / 30, RTT: 30 * ms, MeanRTT: 30 * ms, MaxInflight: L}
		d.Update(w)
		if d.Baseline() == 30*ms {
			if d.Limit() < 20 {
				t.Fatalf("baseline reset only after the limit fell to %d", d.Limit())
			}
			return
		}
		_ = i
	}
	t.Fatalf("baseline never reset; limit %d, baseline %v", d.Limit(), d.Baseline())
}

func TestDefaultProbeRestoresLimit(t *testing.T) {
	d := newTestDefault(t, WithBaselineHorizon(time.Second))
	d.slowStart = false
	at := func(sec int, rtt time.Duration, inflight int) Window {
		w := win(100, 0, rtt, inflight)
		w.Start, w.End = int64(sec)*int64(time.Second), int64(sec)*int64(time.Second)+int64(100*ms)
		return w
	}
	d.Update(at(0, 10*ms, 10)) // baseline at t=0; not in use: hold
	before := d.Limit()
	if got := d.Update(at(2, 11*ms, 10)); got != int(math.Ceil(float64(before)*0.75)) {
		t.Fatalf("probe window limit %d, want 3/4 of %d", got, before)
	}
	if got := d.Update(at(3, 9*ms, 10)); got != before {
		t.Fatalf("limit after the probe %d, want %d restored", got, before)
	}
	if d.Baseline() != 9*ms {
		t.Fatalf("baseline after a lower probe %v, want 9ms", d.Baseline())
	}
	d.Update(at(5, 11*ms, 10))
	d.Update(at(6, 30*ms, 10)) // the next probe window meets a slowdown
	if d.Baseline() != 9*ms {
		t.Fatalf("a higher probe raised the baseline to %v", d.Baseline())
	}
}

func TestDefaultRuntimeSignals(t *testing.T) {
	d := newTestDefault(t, WithRuntimeThresholds(5*ms, 0.2, 0.9))
	w := win(100, 0, 10*ms, 100)
	w.Runtime.GCFraction = 0.5
	if got := d.Update(w); got != 90 {
		t.Fatalf("GC pressure: got %d, want 90", got)
	}
}

func TestOptionValidation(t *testing.T) {
	bad := []Option{
		WithInitialLimit(0), WithLimits(0, 10), WithLimits(10, 5), WithBackoff(1), WithBackoff(math.NaN()),
		WithTimeout(0), WithTolerance(0.5), WithTolerance(math.Inf(1)), WithSmoothing(0), WithSmoothing(1.5),
		WithQueueSize(0), WithMaxHealthyLatency(-1), WithBaselineHorizon(0), WithProbeMultiplier(0),
		WithRuntimeThresholds(0, 0.5, 0.5), WithRuntimeThresholds(ms, math.NaN(), 0.5), WithDropTolerance(1),
		nil,
	}
	for i, o := range bad {
		if _, err := NewDefault(o); err == nil {
			t.Errorf("bad option %d accepted", i)
		} else if !strings.HasPrefix(err.Error(), "adaptive: ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
	if _, err := NewAIMD(WithTolerance(2)); err == nil || !strings.Contains(err.Error(), "WithTolerance") {
		t.Errorf("AIMD accepted an option it does not use: %v", err)
	}
	if _, err := NewVegas(WithLimits(1, 10), WithInitialLimit(20)); err == nil {
		t.Error("initial limit outside the limits accepted")
	}
	if a, err := NewAIMD(WithLimits(30, 50)); err != nil || a.Limit() != 30 {
		t.Errorf("default initial not derived within user limits: %v %v", a, err)
	}
}

// algorithms is the one harness every Algorithm runs through.
var algorithms = []struct {
	name     string
	min, max int
	new      func() (Algorithm, error)
}{
	{"aimd", 2, 300, func() (Algorithm, error) { return NewAIMD(WithLimits(2, 300)) }},
	{"vegas", 2, 300, func() (Algorithm, error) { return NewVegas(WithLimits(2, 300)) }},
	{"gradient2", 2, 300, func() (Algorithm, error) { return NewGradient2(WithLimits(2, 300)) }},
	{"default", 2, 300, func() (Algorithm, error) {
		return NewDefault(WithLimits(2, 300), WithMaxHealthyLatency(50*ms), WithBaselineHorizon(time.Second))
	}},
}

func TestAlgorithmsStayWithinLimits(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				alg, err := a.new()
				if err != nil {
					t.Fatal(err)
				}
				var now int64
				for range rapid.IntRange(1, 200).Draw(t, "windows") {
					d := rapid.Int64Range(1, int64(2*time.Second)).Draw(t, "dur")
					count := rapid.IntRange(0, 5000).Draw(t, "count")
					rtt := time.Duration(rapid.Int64Range(1, int64(10*time.Second)).Draw(t, "rtt"))
					w := Window{Start: now, End: now + d, Count: count,
						Drops:       rapid.IntRange(0, 50).Draw(t, "drops"),
						MaxInflight: rapid.IntRange(0, 600).Draw(t, "inflight")}
					if count > 0 {
						w.RTT, w.MinRTT, w.MeanRTT = rtt, rtt/2, rtt
					}
					w.Runtime.GCFraction = rapid.Float64Range(0, 1).Draw(t, "gc")
					now += d
					if got := alg.Update(w); got < a.min || got > a.max || got != alg.Limit() {
						t.Fatalf("limit %d (Limit() %d) outside [%d, %d]", got, alg.Limit(), a.min, a.max)
					}
				}
			})
		})
	}
}

func TestDefaultProbeAbandonedOnCongestion(t *testing.T) {
	d := newTestDefault(t, WithBaselineHorizon(time.Second))
	d.slowStart = false
	w := win(100, 0, 10*ms, 10)
	d.Update(w)
	w.Start, w.End = int64(2*time.Second), int64(2*time.Second+100*ms)
	probe := d.Update(w) // starts the probe at 3/4
	w.Drops = 50         // the probe window drops a third
	w.Start, w.End = int64(3*time.Second), int64(3*time.Second+100*ms)
	if got := d.Update(w); got >= probe {
		t.Fatalf("drops during the probe: limit %d, want below the probe's %d", got, probe)
	}
	w.Drops = 0
	w.Start, w.End = int64(4*time.Second), int64(4*time.Second+100*ms)
	if got := d.Update(w); got >= 100 {
		t.Fatalf("the abandoned probe restored the old limit: %d", got)
	}
}

// TestPositiveOptionsRejectZeroAndSetTheirField: every option whose value
// must be positive rejects 0 and -1 with an error naming the setting, and
// sets its own field of the config to a positive value.
func TestPositiveOptionsRejectZeroAndSetTheirField(t *testing.T) {
	for _, c := range []struct {
		what string
		opt  func(n int) Option
		got  func(c *config) int64
	}{
		{"initial limit", WithInitialLimit, func(c *config) int64 { return int64(c.initial) }},
		{"queue size", WithQueueSize, func(c *config) int64 { return int64(c.queueSize) }},
		{"probe multiplier", WithProbeMultiplier, func(c *config) int64 { return int64(c.probeMultiplier) }},
		{"timeout", func(n int) Option { return WithTimeout(time.Duration(n)) }, func(c *config) int64 { return int64(c.timeout) }},
		{"max healthy latency", func(n int) Option { return WithMaxHealthyLatency(time.Duration(n)) }, func(c *config) int64 { return int64(c.maxHealthy) }},
		{"baseline horizon", func(n int) Option { return WithBaselineHorizon(time.Duration(n)) }, func(c *config) int64 { return int64(c.baselineHorizon) }},
		{"scheduling target", func(n int) Option { return WithSchedulingTarget(time.Duration(n)) }, func(c *config) int64 { return int64(c.schedTarget) }},
	} {
		for _, bad := range []int{0, -1} {
			var cfg config
			err := c.opt(bad).apply(&cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "adaptive: "+c.what+" must be positive, got ") {
				t.Errorf("%s %d: error %v", c.what, bad, err)
			}
		}
		var cfg config
		if err := c.opt(7).apply(&cfg); err != nil || c.got(&cfg) != 7 {
			t.Errorf("%s 7: set %d, error %v", c.what, c.got(&cfg), err)
		}
	}
}
