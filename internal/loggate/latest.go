package loggate

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Latest logs a run of state changes (a store down, up, down again) at most
// once per interval of Every, and always its latest state: a change within
// the interval of the last line waits for a later Set or Flush, and the
// line then written says how many changes it stands for. The zero value
// writes at most one line a second. Safe for concurrent use; it takes a
// lock, so it is for changes of state, not for events on a hot path (use a
// Gate there).
type Latest struct {
	// Every is the interval; zero means one second. Set before first use.
	Every time.Duration

	mu      sync.Mutex
	gate    Gate
	pending *line
	changes int64
}

// line is a change waiting for its log line.
type line struct {
	log   *slog.Logger
	level slog.Level
	msg   string
	attrs []slog.Attr
}

// Set records the latest state as a line for log at level, and writes it
// when the interval since the last line has passed at now.
func (l *Latest) Set(now int64, log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	l.mu.Lock()
	l.pending = &line{log: log, level: level, msg: msg, attrs: attrs}
	l.changes++
	l.mu.Unlock()
	l.Flush(now)
}

// Flush writes the line waiting, if any, when the interval since the last
// line has passed at now. A caller with a background loop calls it now and
// then, so that the last change of a run is logged.
func (l *Latest) Flush(now int64) {
	l.mu.Lock()
	p := l.pending
	if p == nil {
		l.mu.Unlock()
		return
	}
	l.gate.Every = l.Every
	if ok, _ := l.gate.Allow(now); !ok {
		l.mu.Unlock()
		return
	}
	attrs := p.attrs
	if l.changes > 1 {
		attrs = append(slices.Clip(attrs), slog.Int64("changes", l.changes))
	}
	l.pending, l.changes = nil, 0
	l.mu.Unlock()
	p.log.LogAttrs(context.Background(), p.level, p.msg, attrs...)
}
