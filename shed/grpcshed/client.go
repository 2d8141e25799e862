package grpcshed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/clock"
)

// Defaults of a Client.
const (
	// DefaultMaxRetries is how many times a rejected unary call is retried.
	DefaultMaxRetries = 2
	// DefaultMaxWait is how long a call waits for its target's pause.
	DefaultMaxWait = 10 * time.Second
	// DefaultRetryRatio and DefaultRetryBurst are the retry budget: each
	// call adds DefaultRetryRatio of a retry, up to DefaultRetryBurst.
	DefaultRetryRatio = 0.1
	DefaultRetryBurst = 10
	// DefaultMaxTargets bounds the targets a Client keeps a pause for.
	DefaultMaxTargets = 1024
)

// Client makes a gRPC client honour the servers that shed it: its Unary
// and Stream methods are client interceptors
// (grpc.WithChainUnaryInterceptor(c.Unary),
// grpc.WithChainStreamInterceptor(c.Stream)).
//
// A rejection, codes.ResourceExhausted or codes.Unavailable, that says when
// to come back (a google.rpc.RetryInfo detail or a grpc-retry-pushback-ms
// trailer; the later of the two when both) pauses its target (the
// ClientConn's, grpc.ClientConn.Target) until then: every call to that
// target, on any goroutine, waits for the pause to pass before it is sent,
// never less, and is failed at once, with the rejection's code and the
// time left as RetryInfo, when its deadline or the Client's max wait
// (WithMaxWait) would pass first. A rejected unary call is sent again once
// its pause has passed, at most WithMaxRetries times and within the retry
// budget (WithRetryBudget): each call adds a share of a retry to the
// budget and each retry takes a whole one, so that retries stay a bounded
// share of the traffic when a server is down. A rejection with a pushback
// of -1 (it will never be admitted) is neither paused for nor retried; a
// failure that says nothing of when (a broken connection) is returned as
// it is: gRPC's own retry policy is for those. Do not enable gRPC's retry
// policy for ResourceExhausted or Unavailable beside a Client, or a call
// is retried by both.
//
// A stream is never retried (its messages may have been read): its pause
// is waited for before it opens, and the rejection that ends it, seen by
// RecvMsg, pauses its target.
//
// A Client is safe for concurrent use, by any number of ClientConns, and
// starts no goroutine. It keeps a pause for at most DefaultMaxTargets
// targets at once; past that, calls to a new target are not paused (and
// counted in ClientStats.Untracked) until a pause has passed. The zero
// value is not usable; call NewClient.
type Client struct {
	maxRetries int
	maxWait    time.Duration
	budget     retryBudget

	mu      sync.Mutex
	targets map[string]*pause

	retries, noBudget, waits, failedFast, untracked atomic.Uint64
}

// ClientOption configures NewClient.
type ClientOption interface {
	apply(*Client) error
}

type clientOptionFunc func(*Client) error

func (f clientOptionFunc) apply(c *Client) error { return f(c) }

// WithMaxRetries retries a rejected unary call at most n times (0: never);
// n must not be negative.
func WithMaxRetries(n int) ClientOption {
	return clientOptionFunc(func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("grpcshed: negative max retries %d", n)
		}
		c.maxRetries = n
		return nil
	})
}

// WithMaxWait lets a call wait at most d for its target's pause; a longer
// pause fails it at once. d must be positive.
func WithMaxWait(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("grpcshed: max wait %v is not positive", d)
		}
		c.maxWait = d
		return nil
	})
}

// WithRetryBudget sets the retry budget: every call adds ratio of a retry,
// in [0, 1], to a budget that holds at most burst retries (its start), at
// least 1; a retry takes one. A ratio of 0.1 keeps retries under a tenth of
// the calls once the burst is spent.
func WithRetryBudget(ratio float64, burst int) ClientOption {
	return clientOptionFunc(func(c *Client) error {
		if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
			return fmt.Errorf("grpcshed: retry ratio %v is not in [0, 1]", ratio)
		}
		if burst < 1 || burst > math.MaxInt32 {
			return fmt.Errorf("grpcshed: retry burst %d is not in [1, %d]", burst, math.MaxInt32)
		}
		c.budget.init(ratio, burst)
		return nil
	})
}

// NewClient returns a Client. It returns an error starting with
// "grpcshed: " for an invalid option.
func NewClient(opts ...ClientOption) (*Client, error) {
	c := &Client{maxRetries: DefaultMaxRetries, maxWait: DefaultMaxWait, targets: make(map[string]*pause)}
	c.budget.init(DefaultRetryRatio, DefaultRetryBurst)
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("grpcshed: nil ClientOption")
		}
		if err := o.apply(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ClientStats are a Client's counters; they only grow.
type ClientStats struct {
	// Retries counts unary calls sent again after a rejection, and
	// NoBudget the retries the budget refused.
	Retries, NoBudget uint64
	// Waits counts calls that waited for their target's pause, and
	// FailedFast those failed at once because it outlasted their wait.
	Waits, FailedFast uint64
	// Untracked counts rejections whose target found no room among
	// DefaultMaxTargets targets, so that no pause was kept.
	Untracked uint64
}

// Stats returns the Client's counters. Safe for concurrent use.
func (c *Client) Stats() ClientStats {
	return ClientStats{Retries: c.retries.Load(), NoBudget: c.noBudget.Load(), Waits: c.waits.Load(),
		FailedFast: c.failedFast.Load(), Untracked: c.untracked.Load()}
}

// Unary is a grpc.UnaryClientInterceptor: it waits for the target's pause,
// sends the call, and retries a rejection that says when (see Client).
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	target := cc.Target()
	var trailer metadata.MD
	opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer)) // beside the caller's own
	var last error
	for attempt := 0; ; attempt++ {
		if err := c.await(ctx, target, last); err != nil {
			return err
		}
		trailer = nil
		err := invoker(ctx, method, req, reply, cc, opts...)
		if attempt == 0 {
			c.budget.deposit()
		}
		if !c.learn(target, err, trailer) || attempt >= c.maxRetries {
			return err
		}
		if !c.budget.withdraw() {
			c.noBudget.Add(1)
			return err
		}
		c.retries.Add(1)
		last = err
	}
}

// Stream is a grpc.StreamClientInterceptor: it waits for the target's
// pause before the stream opens, and learns a pause from the rejection
// that ends the stream (see Client).
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	target := cc.Target()
	if err := c.await(ctx, target, nil); err != nil {
		return nil, err
	}
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		c.learn(target, err, nil)
		return nil, err
	}
	c.budget.deposit()
	return &learningStream{ClientStream: cs, c: c, target: target}, nil
}

// learningStream learns a pause from the error that ends its stream.
type learningStream struct {
	grpc.ClientStream
	c      *Client
	target string
	once   sync.Once
}

func (s *learningStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.once.Do(func() { s.c.learn(s.target, err, s.ClientStream.Trailer()) })
	}
	return err
}

// pause is a target's: no call is sent before until (clock.Now), and one
// that cannot wait is failed with code.
type pause struct {
	mu    sync.Mutex
	until int64
	code  codes.Code
}

// learn reads when the rejection err (with trailer) says to come back, and
// pauses target until then. It reports whether err is such a rejection (a
// retry may follow).
func (c *Client) learn(target string, err error, trailer metadata.MD) bool {
	code := status.Code(err)
	if code != codes.ResourceExhausted && code != codes.Unavailable {
		return false
	}
	delay, ok := retryDelay(status.Convert(err), trailer)
	if !ok {
		return false
	}
	now := clock.Now()
	until := now + int64(min(delay, time.Duration(math.MaxInt64-now))) // no wrap
	p := c.pauseOf(target, now, true)
	if p == nil {
		c.untracked.Add(1)
		return true
	}
	p.mu.Lock()
	if until > p.until {
		p.until, p.code = until, code
	}
	p.mu.Unlock()
	return true
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

// pauseOf returns target's pause, making one when make is set and there
// is room (after dropping those that have passed, which are as a fresh
// one); nil when there is none.
func (c *Client) pauseOf(target string, now int64, create bool) *pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.targets[target]; ok || !create {
		return p
	}
	if len(c.targets) >= DefaultMaxTargets {
		for k, p := range c.targets {
			p.mu.Lock()
			passed := p.until <= now
			p.mu.Unlock()
			if passed {
				delete(c.targets, k)
			}
		}
		if len(c.targets) >= DefaultMaxTargets {
			return nil
		}
	}
	p := &pause{}
	c.targets[target] = p
	return p
}

// await waits until target's pause has passed. When it would outlast
// ctx's deadline or the max wait it returns at once: last (the rejection
// being retried) when there is one, else the pause's code with the time
// left as RetryInfo. It returns ctx's status when ctx ends while waiting.
func (c *Client) await(ctx context.Context, target string, last error) error {
	p := c.pauseOf(target, 0, false)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	until, code := p.until, p.code
	p.mu.Unlock()
	now := clock.Now()
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
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// retryBudget allows retries in proportion to calls: a call deposits ratio
// of a retry, up to burst retries, and a retry withdraws one. Its balance
// is in millionths of a retry.
type retryBudget struct {
	balance      atomic.Int64
	ratio, limit int64
}

const budgetUnit = 1_000_000

// init sets the budget's ratio and burst, and fills it.
func (b *retryBudget) init(ratio float64, burst int) {
	b.ratio, b.limit = int64(ratio*budgetUnit), int64(burst)*budgetUnit
	b.balance.Store(b.limit)
}

func (b *retryBudget) deposit() {
	for { // CAS: the balance never passes its limit
		old := b.balance.Load()
		n := min(old+b.ratio, b.limit)
		if n == old || b.balance.CompareAndSwap(old, n) {
			return
		}
	}
}

func (b *retryBudget) withdraw() bool {
	for { // CAS: the balance never goes below zero
		old := b.balance.Load()
		if old < budgetUnit {
			return false
		}
		if b.balance.CompareAndSwap(old, old-budgetUnit) {
			return true
		}
	}
}
