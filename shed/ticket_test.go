package shed

import (
	"context"
	"net/netip"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/ratelimit"
)

// fillNonZero sets every field of the struct v points to, exported or
// not, to a value other than its zero value.
func fillNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem() // settable, unexported too
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(1)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct:
			if f.Type().Name() == "Addr" { // netip.Addr: only its methods make one
				f.Set(reflect.ValueOf(netip.MustParseAddr("192.0.2.1")))
				continue
			}
			fillNonZero(t, f)
		default:
			t.Fatalf("field %s: fill a %v too", v.Type().Field(i).Name, f.Kind())
		}
		if f.IsZero() {
			t.Fatalf("field %s is still zero", v.Type().Field(i).Name)
		}
	}
}

// TestPutForgetsTheWholeAttempt: a ticket back from the pool holds
// nothing of its last Attempt, whichever fields were set (clearAsk clears
// field by field: a field added to Attempt and not to clearAsk fails
// here).
func TestPutForgetsTheWholeAttempt(t *testing.T) {
	var a ticket
	fillNonZero(t, reflect.ValueOf(&a.ask).Elem())
	a.clearAsk()
	if v := reflect.ValueOf(a.ask); !v.IsZero() {
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				t.Errorf("Attempt.%s survives clearAsk", v.Type().Field(i).Name)
			}
		}
	}
}

// TestDoneLeavesTheTicketAsEndAndPutDo: Token.Done (finish, which ends
// the usual short-path attempt in a frame of its own) leaves the ticket
// and the counters exactly as end and then put leave them, for attempts
// on one Global rule and on several, done with and without a status, on
// rules that count every status or only failures.
func TestDoneLeavesTheTicketAsEndAndPutDo(t *testing.T) {
	bucket := Rule{Name: "cap", Algorithm: TokenBucket, Limit: 1000, Rate: ratelimit.Per(1, time.Second)}
	window := Rule{Name: "win", Algorithm: FixedWindow, Limit: 1000, Window: time.Hour}
	failures := bucket
	failures.Count = CountFailures
	inflight := Rule{Name: "inflight", Algorithm: Concurrency, Limit: 10}
	for _, rules := range [][]Rule{{bucket}, {window}, {failures}, {bucket, inflight}, {window, failures}} {
		var names []string
		for _, r := range rules {
			names = append(names, r.Name)
		}
		for _, status := range []int{-1, 200, 503} {
			var tickets [2]*ticket
			var cs [2]*Controller
			for k := range cs {
				c, err := New(rules, WithClock(newFakeClock().now), quiet())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				d, tok, err := c.Decide(context.Background(), Attempt{})
				if err != nil || !d.Allowed {
					t.Fatalf("%v: %+v, %v", names, d, err)
				}
				a := tok.a
				switch {
				case k == 1: // end and put, as Token.done did before finish
					a.gen.Add(1)
					c.end(a, 0, Success, status)
					c.put(a)
				case status < 0:
					tok.Done(Success)
				default:
					tok.DoneStatus(status)
				}
				tickets[k], cs[k] = a, c
			}
			if a, b := cs[0].Stats(), cs[1].Stats(); !reflect.DeepEqual(a, b) {
				t.Errorf("%v, status %d: stats after Done %+v, after end and put %+v", names, status, a, b)
			}
			done, put := reflect.ValueOf(tickets[0]).Elem(), reflect.ValueOf(tickets[1]).Elem()
			for i := range done.NumField() {
				switch name := done.Type().Field(i).Name; name {
				case "c", "ctr", "shard", "semShard": // the Controller's own
				default:
					f := reflect.NewAt(done.Field(i).Type(), done.Field(i).Addr().UnsafePointer()).Elem()
					g := reflect.NewAt(put.Field(i).Type(), put.Field(i).Addr().UnsafePointer()).Elem()
					if !reflect.DeepEqual(f.Interface(), g.Interface()) {
						t.Errorf("%v, status %d: ticket.%s after Done %v, after end and put %v", names, status, name, f, g)
					}
				}
			}
		}
	}
}

// TestTicketHoldsWhatADecisionWritesInItsOwnMemory: the lists an admission
// appends to (the rate rules charged, the concurrency permits, the
// adaptive tokens and their rules) start out in the ticket's own memory.
// As small allocations of their own, two Ps' tickets' lists could share
// a cache line, which every decision on either P then wrote (a Global
// cap's parallel Decide was bimodal across processes, 36 or 72-166 ns).
func TestTicketHoldsWhatADecisionWritesInItsOwnMemory(t *testing.T) {
	lim := aimdLimiter(t, 4, 10)
	c, _, _ := newTest(t, []Rule{
		{Name: "rate", Algorithm: TokenBucket, Limit: 1 << 20, Rate: ratelimit.Per(1, time.Millisecond)},
		{Name: "conc", Algorithm: Concurrency, Limit: 1 << 10},
		{Name: "adaptive", Algorithm: Adaptive, Limiter: lim},
	})
	a := c.get()
	a.ask = Attempt{}
	var d Decision
	a.set = c.set.Load()
	if err := c.decide(context.Background(), a, &d); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	lo, hi := uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(a))+unsafe.Sizeof(*a)
	inside := func(p unsafe.Pointer) bool { return uintptr(p) >= lo && uintptr(p) < hi }
	for name, p := range map[string]unsafe.Pointer{
		"rated": unsafe.Pointer(&a.rated[0]), "sems": unsafe.Pointer(&a.sems[0]),
		"tokens": unsafe.Pointer(&a.tokens[0]), "adaptives": unsafe.Pointer(&a.adaptives[0]),
	} {
		if !inside(p) {
			t.Errorf("%s lies outside the ticket", name)
		}
	}
	c.end(a, 0, Success, -1)
	c.put(a)
}
