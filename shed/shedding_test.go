package shed

import (
	"testing"

	"github.com/sluicehq/sluice/adaptive"
)

// fixedShed is an adaptive algorithm that holds its limit and sheds a
// fixed share of admissions.
type fixedShed struct{ f float64 }

func (fixedShed) Limit() int                 { return 100 }
func (fixedShed) Update(adaptive.Window) int { return 100 }
func (s fixedShed) ShedFraction() float64    { return s.f }

// shedLimiter returns a Limiter of fixedShed{f}, which sheds f from the
// start.
func shedLimiter(t *testing.T, f float64) *adaptive.Limiter {
	t.Helper()
	l, err := adaptive.NewLimiter(fixedShed{f}, adaptive.WithWindowSamples(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.ShedFraction(); got < f-1e-9 || got > f+1e-9 {
		t.Fatalf("limiter sheds %v, want %v", got, f)
	}
	return l
}

func TestSheddingIsTheLargestShareAnAdaptiveRuleSheds(t *testing.T) {
	c, err := New([]Rule{
		{Name: "quiet", Category: "read", Algorithm: Adaptive, Limiter: shedLimiter(t, 0)},
		{Name: "busy", Category: "write", Algorithm: Adaptive, Limiter: shedLimiter(t, 0.25)},
		{Name: "dry", Category: "write", Algorithm: Adaptive, Limiter: shedLimiter(t, 0.75), DryRun: true},
		{Name: "cap", Algorithm: Concurrency, Limit: 10},
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Shedding(); got < 0.25-1e-9 || got > 0.25+1e-9 {
		t.Fatalf("Shedding() = %v, want 0.25 (the busy rule; the dry-run one does not shed)", got)
	}
	if a := testing.AllocsPerRun(100, func() { _ = c.Shedding() }); a != 0 {
		t.Fatalf("Shedding allocates %v times", a)
	}
	if err := c.Reload(Config{Rules: []Rule{{Name: "cap", Algorithm: Concurrency, Limit: 10}}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Shedding(); got != 0 {
		t.Fatalf("Shedding() = %v without an Adaptive rule, want 0", got)
	}
}
