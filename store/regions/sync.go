package regions

import (
	"context"
	"log/slog"
	"time"
)

// loop runs a sync round every period until Close: at each multiple of the
// period on the wall clock it publishes this region's usage, and a read
// delay later reads the others'. Aligned rounds make every region's view
// of the others at most a period plus the read delay old (see the package
// doc).
func (s *Store) loop(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	wait := func(until time.Time) bool {
		timer.Reset(time.Until(until))
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	<-timer.C
	for {
		round := time.Now().Truncate(s.cfg.period).Add(s.cfg.period)
		if !wait(round) {
			return
		}
		start := time.Now()
		usage, err := s.publish(ctx)
		took := time.Since(start)
		if !wait(round.Add(s.cfg.readDelay)) {
			return
		}
		if err == nil {
			start = time.Now()
			err = s.read(ctx, usage)
			took += time.Since(start)
		}
		if ctx.Err() != nil {
			return
		}
		s.ended(err, took)
	}
}

// Sync runs one round now, publish then read, without the read delay (the
// background rounds wait for it): for a caller that wants the others'
// usage at once, such as a test or a program about to serve. It returns
// the Exchange's error; the allowances stay as they were on an error.
func (s *Store) Sync(ctx context.Context) error {
	start := time.Now()
	usage, err := s.publish(ctx)
	if err == nil {
		err = s.read(ctx, usage)
	}
	s.ended(err, time.Since(start))
	return err
}

// publish publishes this region's usage of every key tracked in its
// current window, and returns the entries it published (their window at
// this instant).
func (s *Store) publish(ctx context.Context) ([]Usage, error) {
	now := time.Now().UnixNano()
	var usage []Usage
	for _, l := range s.load() {
		if l == nil || l.keys == nil {
			continue
		}
		span := int64(l.clock.Span())
		window := l.clock.At(now) / span
		from := len(usage)
		usage = l.keys.snapshot(l.spec.Name, window, usage)
		// Kept until the window ends, and a period longer for the clocks'
		// skew.
		ttl := time.Duration(l.clock.Real((window+1)*span)-now) + 2*s.cfg.period
		for i := from; i < len(usage); i++ {
			usage[i].TTL = ttl
		}
	}
	if len(usage) == 0 {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	return usage, s.exchange.Publish(cctx, s.region, usage)
}

// read reads the other regions' usage of the entries published and sets
// each key's allowance from it.
func (s *Store) read(ctx context.Context, usage []Usage) error {
	if len(usage) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if err := s.exchange.Others(cctx, s.region, usage); err != nil {
		return err
	}
	byName := make(map[string]*limit)
	for _, l := range s.load() {
		if l != nil && l.keys != nil {
			byName[l.spec.Name] = l
		}
	}
	for _, u := range usage {
		if l := byName[u.Limit]; l != nil {
			l.keys.learn(u.Key, u.Window, u.Used)
		}
	}
	return nil
}

// ended counts a round's outcome and logs a change between cut off and
// connected.
func (s *Store) ended(err error, took time.Duration) {
	if err != nil {
		s.syncErrors.Add(1)
		if !s.cutOff.Swap(true) {
			s.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "regions: the global store is unavailable, enforcing the last allowances",
				slog.String("region", s.region), slog.String("error", err.Error()))
		}
		return
	}
	s.syncs.Add(1)
	s.lagNS.Store(int64(took))
	s.lastSync.Store(time.Now().UnixNano())
	if s.cutOff.Swap(false) {
		s.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "regions: the global store answers again",
			slog.String("region", s.region))
	}
}
