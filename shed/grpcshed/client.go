package grpcshed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/queueing"
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
// With WithPace, the calls to each target, retries included, are also
// spaced evenly at a rate of the caller's choosing (a queueing.Pacer per
// target), after the pause: the rate an upstream publishes, less a margin.
// A call whose deadline falls before its turn fails at once with
// codes.DeadlineExceeded.
//
// A stream is never retried (its messages may have been read): its pause
// (and its turn) is waited for before it opens, and the rejection that
// ends it, seen by RecvMsg, pauses its target.
//
// A Client is safe for concurrent use, by any number of ClientConns, and
// starts no goroutine. It keeps the state of at most DefaultMaxTargets
// targets at once, dropping only state that is as good as none (a pause
// that has passed, a pacer idle for a period); past that, calls to a new
// target are neither paused nor paced (and counted in
// ClientStats.Untracked). The zero value is not usable; call NewClient.
type Client struct {
	maxRetries int
	maxWait    time.Duration
	budget     retryBudget

	// pace is the rate of WithPace: n calls per period, per target; n == 0
	// without it.
	paceN      int64
	pacePeriod time.Duration

	mu      sync.Mutex
	targets map[string]*target

	retries, noBudget, waits, failedFast, paced, paceMissed, untracked atomic.Uint64
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

// WithPace spaces the calls to each target evenly, n per period, with no
// bursts (queueing.NewPacer's rules for n and period apply: NewClient
// returns its error).
func WithPace(n int64, period time.Duration) ClientOption {
	return clientOptionFunc(func(c *Client) error {
		if _, err := queueing.NewPacer(n, period); err != nil {
			return fmt.Errorf("grpcshed: WithPace: %w", err)
		}
		c.paceN, c.pacePeriod = n, period
		return nil
	})
}

// NewClient returns a Client. It returns an error starting with
// "grpcshed: " for an invalid option.
func NewClient(opts ...ClientOption) (*Client, error) {
	c := &Client{maxRetries: DefaultMaxRetries, maxWait: DefaultMaxWait, targets: make(map[string]*target)}
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
	// Paced counts calls that waited for their turn (WithPace), and
	// PaceMissed those whose deadline or max wait fell before it.
	Paced, PaceMissed uint64
	// Untracked counts calls or rejections whose target found no room
	// among DefaultMaxTargets targets, so that it was not paced or paused.
	Untracked uint64
}

// Stats returns the Client's counters. Safe for concurrent use.
func (c *Client) Stats() ClientStats {
	return ClientStats{Retries: c.retries.Load(), NoBudget: c.noBudget.Load(), Waits: c.waits.Load(),
		FailedFast: c.failedFast.Load(), Paced: c.paced.Load(), PaceMissed: c.paceMissed.Load(),
		Untracked: c.untracked.Load()}
}

// Unary is a grpc.UnaryClientInterceptor: it waits for the target's pause,
// sends the call, and retries a rejection that says when (see Client).
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	name := cc.Target()
	var trailer metadata.MD
	opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer)) // beside the caller's own
	var (
		last    error
		retryAt int64 // when the server said the retry may go
	)
	for attempt := 0; ; attempt++ {
		if err := c.await(ctx, name, retryAt, last); err != nil {
			return err
		}
		trailer = nil
		err := invoker(ctx, method, req, reply, cc, opts...)
		if attempt == 0 {
			c.budget.deposit()
		}
		at, ok := c.learn(name, err, trailer)
		if !ok || attempt >= c.maxRetries {
			return err
		}
		if !c.budget.withdraw() {
			c.noBudget.Add(1)
			return err
		}
		c.retries.Add(1)
		last, retryAt = err, at
	}
}

// Stream is a grpc.StreamClientInterceptor: it waits for the target's
// pause before the stream opens, and learns a pause from the rejection
// that ends the stream (see Client).
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	name := cc.Target()
	if err := c.await(ctx, name, 0, nil); err != nil {
		return nil, err
	}
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		_, _ = c.learn(name, err, nil)
		return nil, err
	}
	c.budget.deposit()
	return &learningStream{ClientStream: cs, c: c, name: name}, nil
}

// learningStream learns a pause from the error that ends its stream.
type learningStream struct {
	grpc.ClientStream
	c    *Client
	name string // the target's
	once sync.Once
}

func (s *learningStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.once.Do(func() { _, _ = s.c.learn(s.name, err, s.ClientStream.Trailer()) })
	}
	return err
}
