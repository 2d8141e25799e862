package storetest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// fatalRecorder is a storetest.TB whose Fatalf records the failure and
// stops the helper by panicking with it.
type fatalRecorder struct{ msg string }

func (*fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// decideAsMemory runs storetest.DecideAsMemory and returns its failure.
func decideAsMemory(s store.Store, req *store.Request, m *store.Memory, mreq *store.Request) (msg string) {
	r := new(fatalRecorder)
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
		msg = r.msg
	}()
	storetest.DecideAsMemory(r, "the remote", s, req, m, mreq)
	return ""
}

// TestDecideAsMemoryFailsOnAnyDifference: two stores that decide alike
// pass at every instant; a Remaining apart fails, naming the backend.
func TestDecideAsMemoryFailsOnAnyDifference(t *testing.T) {
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
	same, m := store.NewMemory(), store.NewMemory()
	sid, mid := storetest.MustRegister(t, same, spec), storetest.MustRegister(t, m, spec)
	for i := range 7 {
		var req, mreq store.Request
		req.Now = int64(i) * int64(time.Minute)
		req.Add(sid, "k", 1)
		mreq.Add(mid, "k", 1)
		if msg := decideAsMemory(same, &req, m, &mreq); msg != "" {
			t.Fatalf("alike stores failed at step %d: %s", i, msg)
		}
	}
	spec.Limit = 6
	other := store.NewMemory()
	oid := storetest.MustRegister(t, other, spec)
	var req, mreq store.Request
	req.Add(oid, "k", 1)
	mreq.Add(mid, "k", 1)
	if msg := decideAsMemory(other, &req, m, &mreq); !strings.Contains(msg, "the remote") {
		t.Fatalf("a store with another limit passed (%q)", msg)
	}
}

// clocked is a Memory that decides on a clock of its own, as a network
// store decides on its server's: every call is 3ms after the last, from
// the start of 2026, whatever the request's Now.
type clocked struct {
	*store.Memory
	now int64
}

func (c *clocked) tick(req *store.Request) {
	if c.now == 0 {
		c.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	}
	c.now += int64(3 * time.Millisecond)
	req.Now = c.now
}

func (c *clocked) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	c.tick(req)
	return c.Memory.Decide(ctx, req, res)
}

func (c *clocked) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	c.tick(req)
	return c.Memory.Refund(ctx, req, res)
}

// TestMemoryOnItsOwnClockDecidesAsMemory: store.Memory deciding and
// refunding on a clock of its own passes DecidesAsMemory and
// HugeDecideAsMemory, sliding windows included: the instants it reports
// are the ones the helpers decide Memory at.
func TestMemoryOnItsOwnClockDecidesAsMemory(t *testing.T) {
	s := &clocked{Memory: store.NewMemory()}
	storetest.DecidesAsMemory(t, "clocked", s, true)
	storetest.HugeDecideAsMemory(t, "clocked", s, true)
}

// TestMemoryOnItsOwnClockPlacesWindowsAsMemory: store.Memory on a clock of
// its own passes WindowsAsMemory without tolerance.
func TestMemoryOnItsOwnClockPlacesWindowsAsMemory(t *testing.T) {
	storetest.WindowsAsMemory(t, "clocked", func(*testing.T) store.Store { return &clocked{Memory: store.NewMemory()} }, 0)
}
