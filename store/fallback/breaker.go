package fallback

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// failed counts a failed remote call and opens the breaker at the
// threshold.
func (f *Store) failed(err error) {
	f.errs.Add(1)
	if f.failures.Add(1) < int64(f.cfg.tripAfter) || f.open.Load() {
		return
	}
	// A new opening before the breaker opens: a decision that sees it
	// open makes or claims the local store of this opening.
	f.episode.Add(1)
	if f.open.CompareAndSwap(false, true) {
		f.trips.Add(1)
		f.logChange("fallback: "+f.cfg.backend+" unavailable, deciding on local limits",
			slog.String("cause", err.Error()), slog.Int64("instances", f.instances.Load()),
			slog.Float64("share", 1/float64(f.instances.Load())))
	}
}

// loop beats every probe interval until Close.
func (f *Store) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.cfg.probe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.modeLog.Flush(clock.Now())
		f.tick(ctx)
	}
}

// tick beats once and hands the outcome to heard, unless the Store is
// closing.
func (f *Store) tick(ctx context.Context) {
	n, err := f.members.Beat(ctx, f.cfg.memory)
	if err != nil && ctx.Err() != nil {
		return
	}
	f.heard(n, err)
}

// heard takes a heartbeat's outcome: n instances counted, or err. A
// failure counts toward opening the breaker. While the breaker is closed,
// a success sets N to n. While it is open, N stays as it was: a remote
// that came back empty, or answers only some probes, counts fewer
// instances than there are until every one has beaten again. The success
// counts toward closing the breaker, and the closing probe may raise N but
// not lower it (the next one may). It runs on the heartbeat goroutine.
func (f *Store) heard(n int64, err error) {
	if err != nil {
		f.okProbes = 0
		if f.open.Load() {
			f.errs.Add(1)
		} else {
			f.failed(err)
		}
		return
	}
	learn := f.cfg.instances == 0 && n > 0
	if !f.open.Load() {
		f.okProbes = 0
		if learn {
			f.instances.Store(n)
		}
		return
	}
	if f.okProbes++; f.okProbes < f.cfg.recoverAfter {
		return
	}
	f.okProbes = 0
	if learn && n > f.instances.Load() {
		f.instances.Store(n)
	}
	if f.open.CompareAndSwap(true, false) {
		f.failures.Store(0)
		f.recoveries.Add(1)
		f.logChange("fallback: "+f.cfg.backend+" answers again, deciding on "+f.cfg.backend,
			slog.Int64("instances", f.instances.Load()))
	}
}

// logChange logs a mode change: at most one line a second, and always the
// latest mode (a change held back is written by the heartbeat goroutine's
// next flush, with the number of changes the line covers).
func (f *Store) logChange(msg string, attrs ...slog.Attr) {
	f.modeLog.Set(clock.Now(), f.cfg.logger, slog.LevelWarn, msg, attrs...)
}
