package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func short(name string, t *testing.T) Scenario {
	t.Helper()
	s, err := Standard(name, true, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s.Duration, s.Warmup = 6*time.Second, time.Second
	return s
}

func mustRun(t *testing.T, s Scenario, c Controller, seed uint64) Result {
	t.Helper()
	res, err := Run(s, c, seed)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunIsDeterministic(t *testing.T) {
	s := short("retry_storm", t)
	s.Change, s.Restore = 2*time.Second, 4*time.Second
	s.Server.Slowdown = []FactorStep{{At: 2 * time.Second, Factor: 3}, {At: 4 * time.Second, Factor: 1}}
	run := func(seed uint64) Result {
		c, err := NewAdaptive("sluice", seed)
		if err != nil {
			t.Fatal(err)
		}
		return mustRun(t, s, c, seed)
	}
	a, b := run(7), run(7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same seed differ")
	}
	if c := run(8); reflect.DeepEqual(a.Series, c.Series) {
		t.Fatal("runs with different seeds are identical")
	}
}

func TestUnloadedServerMatchesTheModel(t *testing.T) {
	s := short("unloaded", t)
	s.Duration = 20 * time.Second
	res := mustRun(t, s, Unlimited(), 1)
	// Half the capacity offered, all of it served in time.
	if math.Abs(res.Goodput-0.5) > 0.02 || math.Abs(res.Offered-0.5) > 0.02 {
		t.Fatalf("goodput %.3f offered %.3f, want 0.5", res.Goodput, res.Offered)
	}
	// Service time 20ms*(0.5 + 0.5*Exp(1)): median 20ms*(0.5+0.5*ln 2) =
	// 16.9ms, with little queueing at 50% load on 16 workers.
	if res.P50 < 16*time.Millisecond || res.P50 > 18*time.Millisecond {
		t.Fatalf("p50 %v, want about 16.9ms", res.P50)
	}
	if res.Shed != 0 || res.Undecided != 0 {
		t.Fatalf("shed %v undecided %d", res.Shed, res.Undecided)
	}
}

func TestOverloadWithoutControlCollapses(t *testing.T) {
	s := short("overload2x", t)
	if res := mustRun(t, s, Unlimited(), 1); res.Goodput > 0.2 {
		t.Fatalf("an unprotected server at 2x kept goodput %.3f; the model lost its queue", res.Goodput)
	}
	c, _ := Static(StdWorkers)
	if res := mustRun(t, s, c, 1); res.Goodput < 0.95 || res.Shed < 0.45 {
		t.Fatalf("a limit at the worker count: goodput %.3f shed %.3f", res.Goodput, res.Shed)
	}
}

func TestCapacityAndSteps(t *testing.T) {
	s := Server{Workers: 10, Service: 10 * time.Millisecond, Slowdown: []FactorStep{{At: time.Second, Factor: 2}}}
	if got := s.Capacity(0); got != 1000 {
		t.Fatalf("capacity %v, want 1000", got)
	}
	if got := s.Capacity(2 * time.Second); got != 500 {
		t.Fatalf("capacity after slowdown %v, want 500", got)
	}
	b := Burst{Every: time.Second, Length: 200 * time.Millisecond, Factor: 3}
	rates := []RateStep{{Rate: 100}}
	if rateAt(rates, b, 500*time.Millisecond) != 100 || rateAt(rates, b, 900*time.Millisecond) != 300 {
		t.Fatal("burst windows wrong")
	}
}

func TestBurstyArrivalsAverage(t *testing.T) {
	s := short("unloaded", t)
	s.Duration = 20 * time.Second
	s.Clients.Rate = []RateStep{{Rate: 200}}
	s.Clients.Burst = Burst{Every: time.Second, Length: 250 * time.Millisecond, Factor: 5}
	res := mustRun(t, s, Unlimited(), 3)
	// 0.75*200 + 0.25*1000 = 400 req/s on average.
	if got := res.Offered * StdCapacity; math.Abs(got-400) > 20 {
		t.Fatalf("offered %.0f req/s, want about 400", got)
	}
}

func TestRetryBudgetBoundsRetries(t *testing.T) {
	s := short("overload2x", t)
	s.Clients.Retry = Retry{Max: 3, Backoff: 10 * time.Millisecond, OnTimeout: true}
	c, _ := Static(StdWorkers)
	free := mustRun(t, s, c, 1)
	s.Clients.Retry.Budget = 0.1
	c, _ = Static(StdWorkers)
	budgeted := mustRun(t, s, c, 1)
	attempts := func(r Result) (a, o float64) {
		for _, p := range r.Series {
			a += p.Attempts
			o += p.Offered
		}
		return a, o
	}
	fa, fo := attempts(free)
	ba, bo := attempts(budgeted)
	if fa < 2*fo {
		t.Fatalf("unbudgeted retries at 2x overload: %.0f attempts for %.0f requests", fa, fo)
	}
	if ba > 1.1*bo+10*4 { // 10 tokens of burst per bucket at most
		t.Fatalf("budget 0.1: %.0f attempts for %.0f requests", ba, bo)
	}
}

func TestPriorityReachesTheController(t *testing.T) {
	s := short("unloaded", t)
	s.Clients.Critical = 0.3
	seen := [2]int{}
	spy := Immediate(admitFunc(func(_ int64, r *Request) (Permit, bool) {
		seen[r.Priority]++
		return noPermit{}, true
	}))
	mustRun(t, s, spy, 1)
	frac := float64(seen[0]) / float64(seen[0]+seen[1])
	if math.Abs(frac-0.3) > 0.02 {
		t.Fatalf("critical fraction %.3f, want 0.3", frac)
	}
}

type admitFunc func(int64, *Request) (Permit, bool)

func (f admitFunc) Admit(now int64, r *Request) (Permit, bool) { return f(now, r) }
func (admitFunc) Limit() int                                   { return 0 }

type twice struct{}

func (twice) Offer(env Env, r *Request) { env.Shed(r); env.Shed(r) }
func (twice) Limit() int                { return 0 }

func TestContractViolationIsAnError(t *testing.T) {
	_, err := Run(short("unloaded", t), twice{}, 1)
	if err == nil || !strings.Contains(err.Error(), "decided twice") {
		t.Fatalf("got %v", err)
	}
}

// fifo is a minimal waiting controller: it shows that the Controller
// contract carries a queueing discipline (hold, wake on Done, time out with
// env.At).
type fifo struct {
	limit, inflight int
	maxWait         time.Duration
	waiting         []*Request
	env             Env
	timedOut        int
}

type fifoPermit struct{ f *fifo }

func (p fifoPermit) Done(int64, Outcome) {
	f := p.f
	f.inflight--
	for f.inflight < f.limit && len(f.waiting) > 0 {
		r := f.waiting[0]
		f.waiting = f.waiting[1:]
		if r != nil {
			f.inflight++
			f.env.Start(r, fifoPermit{f})
		}
	}
}

func (f *fifo) Offer(env Env, r *Request) {
	f.env = env
	if f.inflight < f.limit {
		f.inflight++
		env.Start(r, fifoPermit{f})
		return
	}
	f.waiting = append(f.waiting, r)
	env.At(env.Now()+int64(f.maxWait), func() {
		for j, w := range f.waiting {
			if w == r {
				f.waiting[j] = nil // leave a hole: Done skips it
				f.timedOut++
				env.Shed(r)
				return
			}
		}
	})
}

func (f *fifo) Limit() int { return f.limit }

func TestWaitingControllerThroughEnv(t *testing.T) {
	s := short("overload2x", t)
	f := &fifo{limit: StdWorkers, maxWait: 20 * time.Millisecond}
	res := mustRun(t, s, f, 1)
	if res.Goodput < 0.95 || f.timedOut == 0 {
		t.Fatalf("goodput %.3f, timed out %d", res.Goodput, f.timedOut)
	}
	// Waiting adds at most the max wait to the p99 of a limit at the
	// worker count.
	c, _ := Static(StdWorkers)
	plain := mustRun(t, s, c, 1)
	if res.P99 > plain.P99+25*time.Millisecond {
		t.Fatalf("p99 with a 20ms wait %v vs %v without", res.P99, plain.P99)
	}
}

func TestValidate(t *testing.T) {
	good := short("unloaded", t)
	for name, mutate := range map[string]func(*Scenario){
		"no name":       func(s *Scenario) { s.Name = "" },
		"zero duration": func(s *Scenario) { s.Duration = 0 },
		"warmup":        func(s *Scenario) { s.Warmup = s.Duration },
		"workers":       func(s *Scenario) { s.Server.Workers = 0 },
		"min fraction":  func(s *Scenario) { s.Server.MinFraction = math.NaN() },
		"deadline":      func(s *Scenario) { s.Clients.Deadline = 0 },
		"rate":          func(s *Scenario) { s.Clients.Rate = []RateStep{{Rate: math.Inf(1)}} },
		"no rate":       func(s *Scenario) { s.Clients.Rate = nil },
		"slowdown":      func(s *Scenario) { s.Server.Slowdown = []FactorStep{{Factor: 0}} },
		"retry":         func(s *Scenario) { s.Clients.Retry = Retry{Max: 2} },
		"burst":         func(s *Scenario) { s.Clients.Burst = Burst{Every: 1, Length: 2, Factor: 2} },
	} {
		s := good
		mutate(&s)
		if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Run(good, nil, 1); err == nil {
		t.Error("nil controller accepted")
	}
	if _, err := Standard("nope", true, 0); err == nil {
		t.Error("unknown scenario accepted")
	}
	if _, err := NewAdaptive("nope", 1); err == nil {
		t.Error("unknown controller accepted")
	}
	if _, err := Static(0); err == nil {
		t.Error("static limit 0 accepted")
	}
}
