package streamshed_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connectRules are the rules of the tests: each user holds at most two
// connections at once (leases of an hour), and each address opens at most
// three connections a minute.
func connectRules() []shed.Rule {
	return []shed.Rule{
		{Name: "open-user", Category: streamshed.DefaultCategory, Identity: shed.User,
			Algorithm: shed.Concurrency, Limit: 2, LeaseTTL: time.Hour},
		{Name: "connect-ip", Category: streamshed.DefaultCategory, Identity: shed.IP,
			Algorithm: shed.TokenBucket, Limit: 3, Rate: ratelimit.Per(3, time.Minute)},
	}
}

// newGuard returns a Guard over a Controller of connectRules, both on the
// same clock (now when not nil, the internal clock otherwise), with opts.
func newGuard(t testing.TB, now func() int64, opts ...streamshed.Option) (*streamshed.Guard, *shed.Controller) {
	t.Helper()
	var copts []shed.Option
	if now != nil {
		copts = append(copts, shed.WithClock(now))
		opts = append([]streamshed.Option{streamshed.WithClock(now)}, opts...)
	}
	c, err := shed.New(connectRules(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	g, err := streamshed.NewGuard(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

// frozen is a clock that moves only when told.
type frozen struct {
	mu  sync.Mutex
	now int64
}

func newFrozen() *frozen { return &frozen{now: int64(1000 * time.Hour)} }

func (f *frozen) Now() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *frozen) Add(d time.Duration) {
	f.mu.Lock()
	f.now += int64(d)
	f.mu.Unlock()
}

// closes records the calls of a CloseFunc.
type closes struct {
	mu    sync.Mutex
	calls []closeCall
}

type closeCall struct {
	code   int
	reason string
}

func (c *closes) Close(code int, reason string) error {
	c.mu.Lock()
	c.calls = append(c.calls, closeCall{code, reason})
	c.mu.Unlock()
	return nil
}

func (c *closes) Calls() []closeCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]closeCall(nil), c.calls...)
}

// alice is an attempt of user alice from one address.
func alice() shed.Attempt {
	return shed.Attempt{User: "alice", IP: netip.MustParseAddr("192.0.2.1")}
}

// inflight is the Controller's count of Tokens not done.
func inflight(c *shed.Controller) int64 { return c.Stats().Inflight }
