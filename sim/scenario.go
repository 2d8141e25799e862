package sim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Scenario is one simulated situation. Times are offsets from the start of
// the run.
type Scenario struct {
	// Name identifies the scenario in reports.
	Name string
	// Duration is the simulated time; Warmup is excluded from the summary
	// figures (not from the time series); Bucket is the time-series step.
	Duration, Warmup, Bucket time.Duration
	Server                   Server
	Clients                  Clients
	// Change, when positive, is the instant of the disturbance that settle
	// time is measured from (0: from the start). Restore, when positive, is
	// the instant the disturbance ends, which recovery is measured from.
	Change, Restore time.Duration
	// RefP99 is the p99 of the unloaded server at full capacity, the
	// reference of the settle criterion; 0 disables settle measurement.
	RefP99 time.Duration
}

// Server is the simulated service: Workers process a FIFO of admitted
// requests; a request's service time is drawn from a shifted exponential
// distribution with mean Service (a fixed MinFraction of the mean plus an
// exponential rest), multiplied by the Slowdown factor in force when service
// starts. After service, a Dependency delay in force at that instant is
// added without holding a worker: a slow downstream that adds latency but
// not load.
type Server struct {
	Workers     int
	Service     time.Duration
	MinFraction float64
	Slowdown    []FactorStep
	Dependency  []DelayStep
}

// FactorStep sets a multiplier from At on.
type FactorStep struct {
	At     time.Duration
	Factor float64
}

// DelayStep sets an added latency from At on.
type DelayStep struct {
	At    time.Duration
	Delay time.Duration
}

// RateStep sets the arrival rate of first attempts, in requests per
// second, from At on.
type RateStep struct {
	At   time.Duration
	Rate float64
}

// Clients generate open-loop traffic: first attempts arrive as a Poisson
// process of the Rate in force, multiplied by Burst.Factor during bursts.
type Clients struct {
	Rate  []RateStep
	Burst Burst
	// Deadline is each attempt's timeout from its arrival.
	Deadline time.Duration
	// Critical is the fraction of requests with priority 0.
	Critical float64
	Retry    Retry
}

// Burst multiplies the arrival rate by Factor for Length out of every Every
// (starting at Every-Length); the zero value means no bursts.
type Burst struct {
	Every, Length time.Duration
	Factor        float64
}

// Retry is the clients' retry policy: up to Max retries of a shed attempt
// (and, with OnTimeout, of an attempt that timed out at its deadline), after
// Backoff*2^n with full jitter. With Budget > 0 a retry is sent only while
// retries stay within Budget times the first attempts (a token bucket
// earning Budget per first attempt, holding at most 10 tokens).
type Retry struct {
	Max       int
	Backoff   time.Duration
	OnTimeout bool
	Budget    float64
}

// Capacity returns the true capacity at offset t in requests per second:
// Workers over the mean service time in force.
func (s Server) Capacity(t time.Duration) float64 {
	return float64(s.Workers) / (s.Service.Seconds() * factorAt(s.Slowdown, t))
}

func factorAt(steps []FactorStep, t time.Duration) float64 {
	f := 1.0
	for _, s := range steps {
		if s.At <= t {
			f = s.Factor
		}
	}
	return f
}

func delayAt(steps []DelayStep, t time.Duration) time.Duration {
	var d time.Duration
	for _, s := range steps {
		if s.At <= t {
			d = s.Delay
		}
	}
	return d
}

func rateAt(steps []RateStep, b Burst, t time.Duration) float64 {
	var r float64
	for _, s := range steps {
		if s.At <= t {
			r = s.Rate
		}
	}
	if b.Every > 0 && t%b.Every >= b.Every-b.Length {
		r *= b.Factor
	}
	return r
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }

// Validate reports the first inconsistency of s, with a "sim: " prefix.
func (s Scenario) Validate() error {
	switch {
	case s.Name == "":
		return errors.New("sim: scenario without a name")
	case s.Duration <= 0 || s.Bucket <= 0 || s.Warmup < 0 || s.Warmup >= s.Duration:
		return fmt.Errorf("sim: %s: need 0 <= warmup < duration and a positive bucket", s.Name)
	case s.Server.Workers <= 0 || s.Server.Service <= 0:
		return fmt.Errorf("sim: %s: workers and service time must be positive", s.Name)
	case bad(s.Server.MinFraction) || s.Server.MinFraction < 0 || s.Server.MinFraction > 1:
		return fmt.Errorf("sim: %s: min fraction must be in [0, 1]", s.Name)
	case s.Clients.Deadline <= 0:
		return fmt.Errorf("sim: %s: deadline must be positive", s.Name)
	case bad(s.Clients.Critical) || s.Clients.Critical < 0 || s.Clients.Critical > 1:
		return fmt.Errorf("sim: %s: critical fraction must be in [0, 1]", s.Name)
	case s.Clients.Retry.Max < 0 || (s.Clients.Retry.Max > 0 && s.Clients.Retry.Backoff <= 0) ||
		bad(s.Clients.Retry.Budget) || s.Clients.Retry.Budget < 0:
		return fmt.Errorf("sim: %s: invalid retry policy", s.Name)
	case s.Clients.Burst.Every < 0 || s.Clients.Burst.Length < 0 || s.Clients.Burst.Length > s.Clients.Burst.Every ||
		bad(s.Clients.Burst.Factor) || s.Clients.Burst.Factor < 0:
		return fmt.Errorf("sim: %s: invalid burst", s.Name)
	case len(s.Clients.Rate) == 0:
		return fmt.Errorf("sim: %s: no arrival rate", s.Name)
	}
	for _, f := range s.Server.Slowdown {
		if bad(f.Factor) || f.Factor <= 0 {
			return fmt.Errorf("sim: %s: slowdown factor must be positive", s.Name)
		}
	}
	for _, d := range s.Server.Dependency {
		if d.Delay < 0 {
			return fmt.Errorf("sim: %s: dependency delay must not be negative", s.Name)
		}
	}
	for _, r := range s.Clients.Rate {
		if bad(r.Rate) || r.Rate < 0 {
			return fmt.Errorf("sim: %s: rate must be a finite non-negative number", s.Name)
		}
	}
	return nil
}
