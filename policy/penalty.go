package policy

import (
	"time"

	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/shed"
)

// penaltyConfig is a validated PenaltySpec.
type penaltyConfig struct {
	identity   shed.Identity
	capacity   int
	strikes    int
	window     time.Duration
	timeouts   []time.Duration
	levelDecay time.Duration
}

func (v *validator) penalties(path string, s *PenaltySpec) *penaltyConfig {
	c := &penaltyConfig{capacity: s.Capacity, strikes: s.Strikes}
	id, ok := identities[s.Identity]
	if !ok || id == shed.Global {
		v.failf(path+".identity", "must be ip, user, api_key or tenant, got %q", s.Identity)
	}
	c.identity = id
	if s.Capacity <= 0 || s.Capacity > MaxCapacity {
		v.failf(path+".capacity", "must be in [1, %d], got %d", MaxCapacity, s.Capacity)
	}
	if s.Strikes < 0 || s.Strikes > penalty.MaxStrikes {
		v.failf(path+".strikes", "must be in [1, %d], got %d", penalty.MaxStrikes, s.Strikes)
	}
	if (s.Strikes == 0) != (s.Window == "") {
		v.failf(path+".window", "strikes and window go together")
	}
	c.window = v.duration(path+".window", s.Window)
	for i, t := range s.Timeouts {
		c.timeouts = append(c.timeouts, v.positive(path+".timeouts["+itoa(i)+"]", t))
	}
	c.levelDecay = v.duration(path+".level_decay", s.LevelDecay)
	return c
}

// box builds the penalty box.
func (c *penaltyConfig) box() (*penalty.Box, error) {
	var opts []penalty.Option
	if c.strikes > 0 {
		opts = append(opts, penalty.WithStrikes(c.strikes, c.window))
	}
	if len(c.timeouts) > 0 {
		opts = append(opts, penalty.WithTimeouts(c.timeouts...))
	}
	if c.levelDecay > 0 {
		opts = append(opts, penalty.WithLevelDecay(c.levelDecay))
	}
	return penalty.NewBox(c.capacity, opts...)
}
