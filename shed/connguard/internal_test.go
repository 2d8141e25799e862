package connguard

import (
	"math"
	"net"
	"net/http"
	"testing"
	"time"

	"pgregory.net/rapid"
)

type fixed float64

func (f fixed) Shedding() float64 { return float64(f) }

// Over any run of accepts at a share f, the refused are floor(n*f) give
// or take one, from any starting point of the accumulator.
func TestShedNowRefusesTheShareGiveOrTakeOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := rapid.Float64Range(0, 1).Draw(t, "share")
		n := rapid.IntRange(1, 5000).Draw(t, "n")
		g, err := New(fixed(f), 1)
		if err != nil {
			t.Fatal(err)
		}
		g.conns.acc.Store(rapid.Uint64().Draw(t, "start"))
		refused := 0
		for range n {
			if g.shedNow() {
				refused++
			}
		}
		want := math.Floor(float64(n) * f)
		if d := float64(refused) - want; d < -1 || d > 1 {
			t.Fatalf("refused %d of %d at %v, want %v±1", refused, n, f, want)
		}
	})
}

func TestShedNowIgnoresNaNAndNegativeShares(t *testing.T) {
	for _, f := range []float64{math.NaN(), -0.5, math.Inf(-1)} {
		g, _ := New(fixed(f), 1)
		for range 100 {
			if g.shedNow() {
				t.Fatalf("share %v refused a connection", f)
			}
		}
	}
}

// wrapped is a conn around another, as *tls.Conn is.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

func TestConnStateFindsItsConnUnderAWrapperAndIgnoresOthers(t *testing.T) {
	g, _ := New(fixed(0), 1)
	other, _ := New(fixed(0), 1)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &conn{Conn: a, g: g}
	g.ConnState(wrapped{c}, http.StateIdle)
	if c.state.Load() != stateIdle {
		t.Fatal("state of a wrapped conn not tracked")
	}
	other.ConnState(c, http.StateActive) // another Guard's: ignored
	g.ConnState(a, http.StateActive)     // not the Guard's: ignored
	if c.state.Load() != stateIdle {
		t.Fatal("a state change for a conn of another Guard or none was applied")
	}
}

func TestShedNowAndConnStateDoNotAllocate(t *testing.T) {
	plain, _ := New(fixed(0.5), 1)
	// Pausing and idle shedding read the Signal at every idle transition.
	pacing, _ := New(fixed(0), 1, WithPause(time.Millisecond), WithIdleShed())
	for _, g := range []*Guard{plain, pacing} {
		a, b := net.Pipe()
		c := &conn{Conn: a, g: g}
		if n := testing.AllocsPerRun(100, func() {
			_ = g.shedNow()
			g.ConnState(c, http.StateActive)
			g.ConnState(c, http.StateIdle)
		}); n != 0 {
			t.Errorf("%v allocations", n)
		}
		_, _ = a.Close(), b.Close()
	}
}

// At any instant a pacing listener is open or closed, never both; the
// open part is the first 1-f of the period and a closed part lasts to the
// period's end.
func TestPhaseOpensTheFirstShareOfEveryPeriod(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		period := time.Duration(rapid.Int64Range(1, int64(MaxPausePeriod)).Draw(t, "period"))
		f := rapid.Float64Range(-0.5, 1.5).Draw(t, "share")
		elapsed := time.Duration(rapid.Int64Range(0, 1000*int64(period)).Draw(t, "elapsed"))
		open, closed := phase(elapsed, period, f)
		into := elapsed % period
		cut := period // the end of the open part
		switch {
		case f >= 1:
			cut = 0
		case f > 0:
			cut = time.Duration(float64(period) * (1 - f))
		}
		if (open > 0) == (closed > 0) {
			t.Fatalf("open %v and closed %v at once", open, closed)
		}
		if into < cut && open != cut-into {
			t.Fatalf("%v into the period, open part to %v: open %v more, want %v", into, cut, open, cut-into)
		}
		if into >= cut && closed != period-into {
			t.Fatalf("%v into the period, open part to %v: closed %v more, want %v", into, cut, closed, period-into)
		}
	})
}
