package connguard_test

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/shed/connguard"
)

// stamped is an admitted connection and the instant Accept returned it.
type stamped struct {
	c  net.Conn
	at time.Time
}

// timedAcceptor runs Accept in a loop and hands over what it admits with
// the time; the error that ended the loop is sent on errc.
func timedAcceptor(ln net.Listener) (<-chan stamped, <-chan error) {
	out, errc := make(chan stamped, 256), make(chan error, 1)
	go func() {
		defer close(out)
		for {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			out <- stamped{c, time.Now()}
		}
	}()
	return out, errc
}

func TestPauseAcceptsNothingWhileEverythingIsShedAndResumesWhenItStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = 10 * time.Millisecond
		pl := newPipeListener()
		sig := new(share)
		g := newGuard(t, sig, connguard.Unbounded, connguard.WithPause(period))
		gl := g.Listener(pl)
		admitted, errc := timedAcceptor(gl)
		pl.dial()
		first := recvStamped(admitted)
		if first == nil {
			t.Fatal("not accepted while nothing is shed")
		}
		// A change of the Signal takes effect at the latest when the
		// period ends: ln's Accept has that as its deadline.
		sig.set(1)
		time.Sleep(period)
		// Five more periods: still paused, and the connection is not refused.
		staysQueued(t, admitted, readAll(pl.dial()), 5, period)
		if s := g.Stats(); s.Shed != 0 || s.Accepted != 1 || s.Pauses < 5 || s.Paused < 5*period {
			t.Fatalf("stats %+v, want 1 accepted, none shed, at least 5 pauses over 5 periods", s)
		}
		// Requests that end while the share holds do not wake the listener.
		pauses := g.Stats().Pauses
		for range 3 {
			g.ConnState(first.c, http.StateActive)
			g.ConnState(first.c, http.StateIdle)
		}
		synctest.Wait()
		if s := g.Stats(); s.Pauses != pauses {
			t.Fatalf("%d pauses after requests that ended at the same share, want %d", s.Pauses, pauses)
		}
		// Shedding stops; a request that ends (its connection going idle)
		// ends the pause at once, without waiting for the period's end.
		sig.set(0)
		before := time.Now()
		g.ConnState(first.c, http.StateActive)
		g.ConnState(first.c, http.StateIdle)
		c := recvStamped(admitted)
		if c == nil || !c.at.Equal(before) {
			t.Fatalf("after a nudge: %v, want the waiting connection accepted at %v", c, before)
		}
		_, _ = c.c.Close(), first.c.Close()
		if err := gl.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	})
}

func TestPauseAcceptsOnlyInTheOpenShareOfEachPeriod(t *testing.T) {
	for _, f := range []float64{0.25, 0.5, 0.9} {
		synctest.Test(t, func(t *testing.T) {
			const period = 10 * time.Millisecond
			open := time.Duration(float64(period) * (1 - f))
			pl := newPipeListener()
			sig := new(share)
			sig.set(f)
			g := newGuard(t, sig, connguard.Unbounded, connguard.WithPause(period), connguard.WithRefusal(connguard.Close))
			gl := g.Listener(pl)
			start := time.Now()
			admitted, _ := timedAcceptor(gl)
			var conns []net.Conn
			atOnce, want, last := 0, 0, 0
			for ms := range 50 {
				at := time.Duration(ms) * time.Millisecond
				time.Sleep(at - time.Since(start))
				pl.dial()
				if at%period < open {
					want++
				} else if ms >= 40 {
					last++ // in the last closed part: still waiting at the end
				}
				synctest.Wait()
				for drained := false; !drained; {
					select {
					case c := <-admitted:
						conns = append(conns, c.c)
						if into := c.at.Sub(start) % period; into >= open {
							t.Fatalf("share %v: accepted %v into a period whose open part is %v", f, into, open)
						}
					default:
						drained = true
					}
				}
				if len(conns) == ms+1 { // FIFO: this one, and every one before it
					atOnce++
				}
			}
			// A connection dialled in an open part is accepted at once, one
			// dialled in a closed part when the next open part begins.
			if atOnce != want || len(conns) != 50-last {
				t.Fatalf("share %v: %d of 50 accepted at once (want %d), %d in all (want %d)", f, atOnce, want, len(conns), 50-last)
			}
			if s := g.Stats(); s.Shed != 0 || s.Pauses == 0 {
				t.Fatalf("share %v: stats %+v, want pauses and no refusal", f, s)
			}
			_ = gl.Close()
			synctest.Wait()
			for _, c := range conns {
				_ = c.Close()
			}
		})
	}
}

func TestIdleShedClosesTheShedShareOfConnectionsGoingIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := newPipeListener()
		sig := new(share)
		g := newGuard(t, sig, connguard.Unbounded, connguard.WithIdleShed())
		gl := g.Listener(pl)
		admitted := acceptor(gl)
		var server []net.Conn
		var client []<-chan string
		for range 4 {
			client = append(client, readAll(pl.dial()))
			server = append(server, recv(admitted))
		}
		idle := func(c net.Conn) { g.ConnState(c, http.StateActive); g.ConnState(c, http.StateIdle) }
		idle(server[0]) // nothing shed: kept
		sig.set(0.5)
		for _, c := range server {
			idle(c)
		}
		synctest.Wait()
		closed := 0
		for _, ch := range client {
			select {
			case <-ch:
				closed++
			default:
			}
		}
		if s := g.Stats(); closed != 2 || s.IdleShed != 2 || s.Open != 2 {
			t.Fatalf("%d of 4 closed at a share of 0.5, stats %+v; want 2 closed and counted, 2 open", closed, s)
		}
		for _, c := range server {
			_ = c.Close()
		}
		_ = gl.Close()
		synctest.Wait()
	})
}

func TestNewRejectsBadPauseAndBacklog(t *testing.T) {
	for name, o := range map[string]connguard.Option{
		"zero period":     connguard.WithPause(0),
		"negative period": connguard.WithPause(-time.Millisecond),
		"long period":     connguard.WithPause(connguard.MaxPausePeriod + 1),
		"zero backlog":    connguard.WithBacklog(0),
	} {
		if _, err := connguard.New(new(share), 1, o); err == nil || !strings.HasPrefix(err.Error(), "connguard: ") {
			t.Errorf("%s: error %v, want one starting with connguard: ", name, err)
		}
	}
}

// recvStamped is recv for timedAcceptor.
func recvStamped(admitted <-chan stamped) *stamped {
	synctest.Wait()
	select {
	case c, ok := <-admitted:
		if ok {
			return &c
		}
	default:
	}
	return nil
}

func TestPauseWaitsAtTheBoundInsteadOfRefusing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = 10 * time.Millisecond
		pl := newPipeListener()
		g := newGuard(t, new(share), 1, connguard.WithPause(period))
		gl := g.Listener(pl)
		admitted, _ := timedAcceptor(gl)
		pl.dial()
		held := recvStamped(admitted)
		if held == nil {
			t.Fatal("the first connection was not admitted")
		}
		g.ConnState(held.c, http.StateActive)
		time.Sleep(period) // the Accept waiting in ln sees the bound at the period's end
		staysQueued(t, admitted, readAll(pl.dial()), 5, period)
		if s := g.Stats(); s.Full != 0 || s.Pauses < 5 {
			t.Fatalf("stats %+v, want no refusal and a pause per period", s)
		}
		// The held connection going idle makes room at once: the waiting
		// one takes its place.
		before := time.Now()
		g.ConnState(held.c, http.StateIdle)
		c := recvStamped(admitted)
		if c == nil || !c.at.Equal(before) {
			t.Fatalf("after the held connection went idle: %v, want the waiting one admitted at %v", c, before)
		}
		if s := g.Stats(); s.IdleClosed != 1 || s.Full != 0 {
			t.Fatalf("stats %+v, want the idle connection closed for the waiting one", s)
		}
		_, _ = c.c.Close(), held.c.Close()
		_ = gl.Close()
		synctest.Wait()
	})
}

// staysQueued checks that over n periods Accept admits nothing and the
// client waiting (its readAll) is not answered: its connection stays in
// the queue.
func staysQueued(t *testing.T, admitted <-chan stamped, waiting <-chan string, n int, period time.Duration) {
	t.Helper()
	for range n {
		time.Sleep(period)
		if c := recvStamped(admitted); c != nil {
			t.Fatal("a connection was admitted during a pause")
		}
	}
	select {
	case got := <-waiting:
		t.Fatalf("the waiting connection was answered %q; a pause must leave it in the queue", got)
	default:
	}
}
