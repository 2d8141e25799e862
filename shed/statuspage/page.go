package statuspage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/shed"
)

// Defaults of a Page: one sample a second, five minutes of them.
const (
	DefaultInterval = time.Second
	DefaultHistory  = 300
)

// MaxHistory is the most samples WithHistory accepts.
const MaxHistory = 100_000

// Page is a Controller's status page and its JSON report (see the package
// doc). It is safe for concurrent use, starts no goroutine and needs no
// Close. The zero value is not usable; call New.
type Page struct {
	c        *shed.Controller
	now      func() int64
	interval time.Duration
	tmpl     pageTemplate

	// authorize approves the write actions (WithActions); nil: read-only.
	authorize func(*http.Request) bool
	top       int // WithTopKeys

	mu   sync.Mutex
	hist ring
}

type config struct {
	now       func() int64
	interval  time.Duration
	history   int
	authorize func(*http.Request) bool // WithActions
	top       int
}

// Option configures New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithInterval sets the time between the samples Run takes (the default
// is DefaultInterval); a request records a sample when the newest is half
// of it old. It must be positive.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("statuspage: WithInterval(%v): the interval must be positive", d)
		}
		c.interval = d
		return nil
	})
}

// WithHistory sets how many samples the Page keeps (the default is
// DefaultHistory): the chart spans n intervals. It must be at least 2 (a
// rate needs two samples) and at most MaxHistory.
func WithHistory(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 2 || n > MaxHistory {
			return fmt.Errorf("statuspage: WithHistory(%d): the history must hold 2 to %d samples", n, MaxHistory)
		}
		c.history = n
		return nil
	})
}

// DefaultTopKeys is how many hot keys of each per-key rule, and how many
// penalized clients, a Page lists unless WithTopKeys says otherwise.
const DefaultTopKeys = 10

// WithTopKeys sets how many hot keys of each per-key rule, and how many
// penalized clients, the Page lists: 1 to shed.MaxListed.
func WithTopKeys(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > shed.MaxListed {
			return fmt.Errorf("statuspage: WithTopKeys(%d): list 1 to %d keys", n, shed.MaxListed)
		}
		c.top = n
		return nil
	})
}

// WithClock reads the time from now (monotonic nanoseconds, positive, as
// for shed.WithClock) instead of the internal clock, for Run, Report and
// the samples that requests record: for tests.
func WithClock(now func() int64) Option {
	return optionFunc(func(c *config) error {
		if now == nil {
			return errors.New("statuspage: WithClock(nil)")
		}
		c.now = now
		return nil
	})
}

// New returns the status page of c. It returns an error for a nil c and
// for an invalid option; the history's memory (a few words per rule per
// sample) is allocated as samples come.
func New(c *shed.Controller, opts ...Option) (*Page, error) {
	if c == nil {
		return nil, errors.New("statuspage: nil Controller")
	}
	cfg := config{now: clock.Now, interval: DefaultInterval, history: DefaultHistory, top: DefaultTopKeys}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("statuspage: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	tmpl, err := newPageTemplate()
	if err != nil {
		return nil, err
	}
	p := &Page{c: c, now: cfg.now, interval: cfg.interval, tmpl: tmpl, authorize: cfg.authorize, top: cfg.top}
	p.hist.buf = make([]sample, cfg.history)
	return p, nil
}

// SampleAt records a sample of the Controller's Stats taken at now
// (monotonic nanoseconds), unless the newest sample is younger than half
// an interval. A now earlier than the newest sample's is recorded as no
// sample. It does not block the Controller's request path.
func (p *Page) SampleAt(now int64) {
	s := p.c.Stats()
	p.mu.Lock()
	p.record(now, &s)
	p.mu.Unlock()
}

// record adds s at now to the history, under p.mu, as SampleAt says.
func (p *Page) record(now int64, s *shed.Stats) {
	if n := p.hist.newest(); n != nil && (now < n.at || now-n.at < int64(p.interval/2)) {
		return
	}
	p.hist.push(newSample(now, s))
}

// Run records a sample every interval until ctx is done, and returns
// ctx.Err(). It blocks: start it in a goroutine of the caller's, once per
// Page, for the chart to cover the last minutes whether or not anyone
// looks at the page.
func (p *Page) Run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	p.SampleAt(p.now())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			p.SampleAt(p.now())
		}
	}
}

// Report is shorthand for ReportAt(now) on the Page's clock (WithClock).
func (p *Page) Report() Report { return p.ReportAt(p.now()) }

// ReportAt records a sample at now if one is due (as SampleAt) and returns
// the report of the Controller's state: the Stats just read, with the
// rates and charts of the history, and the hot keys and penalized clients
// read from the Controller's tables now (on the Controller's clock).
func (p *Page) ReportAt(now int64) Report {
	s := p.c.Stats()
	p.mu.Lock()
	p.record(now, &s) // the history now holds at least one sample
	rep := build(&s, &p.hist, p.interval)
	p.mu.Unlock()
	p.lists(&rep)
	return rep
}

// lists fills rep's hot keys and penalized clients.
func (p *Page) lists(rep *Report) {
	rep.Actions = p.authorize != nil
	if hk, err := p.c.HotKeys(p.top); err != nil {
		rep.HotKeysNote = strings.TrimPrefix(err.Error(), "shed: ")
	} else {
		rep.HotKeys = make([]HotKeyReport, len(hk))
		for i, k := range hk {
			rep.HotKeys[i] = HotKeyReport{Rule: k.Rule, Key: k.Key, Scope: k.Scope, Used: k.Used, Limit: k.Limit,
				Remaining: k.Remaining, ResetAfterSeconds: k.ResetAfter.Seconds()}
		}
	}
	if rep.Penalty == nil {
		return // no box that reports itself
	}
	if pc, err := p.c.Penalized(p.top); err == nil {
		rep.Penalized = make([]PenalizedReport, len(pc))
		for i, c := range pc {
			rep.Penalized[i] = PenalizedReport{Key: c.Key, LeftSeconds: c.Left.Seconds(), Level: c.Level, Strikes: c.Strikes}
		}
	}
}
