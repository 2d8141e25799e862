package sim

import (
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
)

// Unlimited admits everything: the "none" controller.
func Unlimited() Controller { return Immediate(unlimited{}) }

type unlimited struct{}

type noPermit struct{}

func (noPermit) Done(int64, Outcome) {}

func (unlimited) Admit(int64, *Request) (Permit, bool) { return noPermit{}, true }
func (unlimited) Limit() int                           { return 0 }

// Static admits while fewer than limit requests are in flight, on a
// concurrency.Semaphore. It returns an error for a limit below 1.
func Static(limit int) (Controller, error) {
	s, err := concurrency.NewSemaphore(int64(limit))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return Immediate(static{s}), nil
}

type static struct{ s *concurrency.Semaphore }

type semPermit struct{ s *concurrency.Semaphore }

func (p semPermit) Done(int64, Outcome) { p.s.Release(1) }

func (c static) Admit(_ int64, _ *Request) (Permit, bool) {
	if !c.s.TryAcquire(1) {
		return nil, false
	}
	return semPermit{c.s}, true
}

func (c static) Limit() int { return int(c.s.Limit()) }

// Adaptive drives an adaptive.Limiter in virtual time: admission is
// l.TryAcquireAt(now, ...) with the request's deadline (so deadline-aware
// admission is exercised) and its priority as the pressure class; the
// outcome is Token.DoneAt(now, ...), Good as Success and Late as Dropped.
// The Limiter must not be used by anything else during the run.
func Adaptive(l *adaptive.Limiter) Controller { return Immediate(adaptiveAdmitter{l}) }

type adaptiveAdmitter struct{ l *adaptive.Limiter }

type tokenPermit struct{ t adaptive.Token }

func (p tokenPermit) Done(now int64, o Outcome) {
	if o == Good {
		p.t.DoneAt(now, adaptive.Success)
	} else {
		p.t.DoneAt(now, adaptive.Dropped)
	}
}

func (a adaptiveAdmitter) Admit(now int64, r *Request) (Permit, bool) {
	t, err := a.l.TryAcquireAt(now, adaptive.Request{Class: adaptive.Class(r.Priority), Deadline: r.Deadline})
	if err != nil {
		return nil, false
	}
	return tokenPermit{t}, true
}

func (a adaptiveAdmitter) Limit() int { return a.l.Limit() }
