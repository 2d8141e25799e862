package grpcshed

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/queueing"
)

// target is what a Client keeps of one: its pause (no call is sent before
// until, on clock.Now; one that cannot wait is failed with code) and its
// pacer (WithPace only).
type target struct {
	mu    sync.Mutex
	until int64
	code  codes.Code

	pacer *queueing.Pacer
	// waiters are the calls waiting for a turn, and lastTurn the latest
	// turn that started: a pacer without waiters whose last turn is a
	// period old has nothing reserved that the next call could not take.
	waiters  int
	lastTurn int64
}

// idle reports whether t is as good as a fresh target at now.
func (t *target) idle(now int64, period time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.until <= now && (t.pacer == nil || t.waiters == 0 && now-t.lastTurn >= int64(period))
}

// learn reads when the rejection err (with trailer) says to come back, and
// pauses the target named name until then. It returns that instant, and
// false when err is no such rejection (no retry may follow).
func (c *Client) learn(name string, err error, trailer metadata.MD) (int64, bool) {
	code := status.Code(err)
	if code != codes.ResourceExhausted && code != codes.Unavailable {
		return 0, false
	}
	delay, ok := retryDelay(status.Convert(err), trailer)
	if !ok {
		return 0, false
	}
	now := clock.Now()
	until := now + int64(min(delay, time.Duration(math.MaxInt64-now))) // no wrap
	p := c.targetOf(name, now, true)
	if p == nil {
		c.untracked.Add(1)
		return until, true
	}
	p.mu.Lock()
	if until > p.until {
		p.until, p.code = until, code
	}
	p.mu.Unlock()
	return until, true
}

// retryDelay returns the later of st's RetryInfo and trailer's pushback,
// and false when neither says when, or the pushback says never (negative
// or not a number, per gRFC A6).
func retryDelay(st *status.Status, trailer metadata.MD) (time.Duration, bool) {
	var delay time.Duration
	found := false
	if v := trailer.Get(PushbackKey); len(v) > 0 {
		ms, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || ms < 0 || len(v) > 1 {
			return 0, false
		}
		delay, found = time.Duration(min(ms, int64(math.MaxInt64/time.Millisecond)))*time.Millisecond, true
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			if rd := ri.GetRetryDelay().AsDuration(); rd >= 0 { // AsDuration saturates
				delay, found = max(delay, rd), true
			}
		}
	}
	return delay, found
}

// targetOf returns the target named name, making one when create is set
// and there is room (after dropping those as good as fresh); nil when
// there is none.
func (c *Client) targetOf(name string, now int64, create bool) *target {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.targets[name]; ok || !create {
		return t
	}
	if len(c.targets) >= DefaultMaxTargets {
		for k, t := range c.targets {
			if t.idle(now, c.pacePeriod) {
				delete(c.targets, k)
			}
		}
		if len(c.targets) >= DefaultMaxTargets {
			return nil
		}
	}
	t := &target{}
	if c.paceN > 0 {
		t.pacer, _ = queueing.NewPacer(c.paceN, c.pacePeriod) // validated by WithPace
	}
	c.targets[name] = t
	return t
}

// await waits until the pause of the target named name has passed, and
// notBefore (a retry's own instant, kept even when the target is not
// tracked), then (WithPace) for the call's turn. When the pause would
// outlast ctx's deadline or the max wait it returns at once: last (the
// rejection being retried) when there is one, else the pause's code with
// the time left as RetryInfo; when the turn would, DeadlineExceeded. It
// returns ctx's status when ctx ends while waiting.
func (c *Client) await(ctx context.Context, name string, notBefore int64, last error) error {
	now := clock.Now()
	t := c.targetOf(name, now, c.paceN > 0)
	until, code := notBefore, status.Code(last)
	if t != nil {
		t.mu.Lock()
		if t.until > until {
			until, code = t.until, t.code
		}
		t.mu.Unlock()
	} else if c.paceN > 0 {
		c.untracked.Add(1)
	}
	if err := c.awaitPause(ctx, now, until, code, last); err != nil {
		return err
	}
	if t == nil || t.pacer == nil {
		return nil
	}
	return c.awaitTurn(ctx, t)
}

// awaitPause waits until until (see await).
func (c *Client) awaitPause(ctx context.Context, now, until int64, code codes.Code, last error) error {
	if until <= now {
		return nil
	}
	left := time.Duration(until - now)
	dl, hasDL := ctx.Deadline()
	if left > c.maxWait || hasDL && time.Until(dl) < left {
		c.failedFast.Add(1)
		if last != nil {
			return last
		}
		st := status.New(code, "grpcshed: the server asked for a pause")
		if s, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(left)}); err == nil {
			st = s
		}
		return st.Err()
	}
	c.waits.Add(1)
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// awaitTurn waits for the call's turn on t's pacer, at most the max wait.
func (c *Client) awaitTurn(ctx context.Context, t *target) error {
	t.mu.Lock()
	t.waiters++
	t.mu.Unlock()
	if t.pacer.Allow() { // the common case: no wait, no timer
		c.turnTaken(t)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.maxWait)
	defer cancel()
	err := t.pacer.Wait(wctx)
	c.turnTaken(t)
	switch {
	case err == nil:
		c.paced.Add(1)
		return nil
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	c.paceMissed.Add(1)
	return status.Error(codes.DeadlineExceeded, "grpcshed: the call's turn at its target's pace falls past its deadline")
}

// turnTaken records that a waiter of t left, at its turn or not (then
// lastTurn is later than it need be, which only keeps t longer).
func (c *Client) turnTaken(t *target) {
	now := clock.Now()
	t.mu.Lock()
	t.waiters--
	t.lastTurn = max(t.lastTurn, now)
	t.mu.Unlock()
}
