package connguard_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/shed/connguard"
)

func newGuard(t *testing.T, sig connguard.Signal, max int, opts ...connguard.Option) *connguard.Guard {
	t.Helper()
	g, err := connguard.New(sig, max, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// recv returns the next admitted connection, or nil when Accept admitted
// none once every goroutine of the bubble is blocked.
func recv(admitted <-chan net.Conn) net.Conn {
	synctest.Wait()
	select {
	case c := <-admitted:
		return c
	default:
		return nil
	}
}

const want503 = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

func TestAtTheBoundTheNextConnectionIsRefusedWithA503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := newPipeListener()
		g := newGuard(t, new(share), 2, connguard.WithRetryAfter(1500*time.Millisecond))
		admitted := acceptor(g.Listener(pl))
		var held []net.Conn
		for range 2 {
			pl.dial()
			if c := recv(admitted); c == nil {
				t.Fatal("a connection under the bound was not admitted")
			} else {
				held = append(held, c)
			}
		}
		answer := readAll(pl.dial())
		if c := recv(admitted); c != nil {
			t.Fatal("a connection past the bound with none idle was admitted")
		}
		if got := <-answer; got != want503 {
			t.Fatalf("refused connection read %q, want %q", got, want503)
		}
		if s := g.Stats(); s.Full != 1 || s.Accepted != 2 || s.Open != 2 || s.Shed != 0 {
			t.Fatalf("stats %+v, want 1 full, 2 accepted and open", s)
		}
		// Closing a held connection makes room.
		_ = held[0].Close()
		_ = held[0].Close() // twice: counted once
		pl.dial()
		c := recv(admitted)
		if c == nil {
			t.Fatal("no room after a held connection closed")
		}
		if s := g.Stats(); s.Accepted != 3 || s.Open != 2 {
			t.Fatalf("stats %+v, want 3 accepted, 2 open", s)
		}
		_, _ = c.Close(), held[1].Close()
		_ = pl.Close()
		synctest.Wait()
	})
}

// atBound is a Guard at its bound, which closes the connections it
// refuses, and the connections it holds: the server's ends and what each
// client end reads.
type atBound struct {
	g        *connguard.Guard
	pl       *pipeListener
	admitted <-chan net.Conn
	server   []net.Conn
	client   []<-chan string
}

// newAtBound returns a Guard holding its bound of n connections (in a
// synctest bubble).
func newAtBound(t *testing.T, n int) *atBound {
	b := &atBound{pl: newPipeListener(), g: newGuard(t, new(share), n, connguard.WithRefusal(connguard.Close))}
	b.admitted = acceptor(b.g.Listener(b.pl))
	for range n {
		b.client = append(b.client, readAll(b.pl.dial()))
		b.server = append(b.server, recv(b.admitted))
	}
	return b
}

func TestAtTheBoundTheIdleConnectionIsClosedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAtBound(t, 3)
		g, pl, admitted, server, client := b.g, b.pl, b.admitted, b.server, b.client
		// One busy, one idle, one that has not sent a request yet.
		g.ConnState(server[0], http.StateActive)
		g.ConnState(server[1], http.StateActive)
		g.ConnState(server[1], http.StateIdle)
		pl.dial()
		c := recv(admitted)
		if c == nil {
			t.Fatal("a connection at the bound was refused while one was idle")
		}
		select {
		case <-client[1]: // the idle one's client sees the close
		default:
			t.Fatal("the idle connection was not closed")
		}
		for _, i := range []int{0, 2} {
			select {
			case <-client[i]:
				t.Fatalf("connection %d (not idle) was closed", i)
			default:
			}
		}
		// With none idle now, the next one is refused.
		refused := readAll(pl.dial())
		if recv(admitted) != nil {
			t.Fatal("admitted past the bound with none idle")
		}
		if got := <-refused; got != "" {
			t.Fatalf("Close refusal wrote %q", got)
		}
		// An evicted connection stays evicted: a late state change does
		// not make it a candidate again, and the server's close counts once.
		g.ConnState(server[1], http.StateIdle)
		_ = server[1].Close()
		if s := g.Stats(); s.IdleClosed != 1 || s.Full != 1 || s.Accepted != 4 || s.Open != 3 {
			t.Fatalf("stats %+v, want 1 idle closed, 1 full, 4 accepted, 3 open", s)
		}
		for _, s := range append(server, c) {
			_ = s.Close()
		}
		_ = pl.Close()
		synctest.Wait()
	})
}

// Clients keep their idle connections last in, first out (net/http's
// Transport, most pools): the one idle the longest is the one least likely
// to carry the client's next request, so that closing it races with no
// request in flight. The oldest connection is not it.
func TestAtTheBoundTheConnectionIdleTheLongestIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAtBound(t, 3)
		g, pl, admitted, server, client := b.g, b.pl, b.admitted, b.server, b.client
		defer func() {
			for _, s := range server {
				_ = s.Close()
			}
			_ = pl.Close()
			synctest.Wait()
		}()
		// Each serves a request; they go idle newest first, the oldest
		// connection last: it carried the latest answer.
		for _, i := range []int{2, 1, 0} {
			g.ConnState(server[i], http.StateActive)
		}
		for _, i := range []int{2, 1, 0} {
			g.ConnState(server[i], http.StateIdle)
		}
		for n, want := range []int{2, 1, 0} {
			pl.dial()
			if recv(admitted) == nil {
				t.Fatalf("new connection %d refused at the bound with idle ones", n)
			}
			for i := range client {
				select {
				case <-client[i]:
					if i != want {
						t.Fatalf("new connection %d closed connection %d, want %d (idle the longest)", n, i, want)
					}
					client[i] = nil // read once: a nil channel never answers again
				default:
					if i == want {
						t.Fatalf("new connection %d did not close connection %d (idle the longest)", n, i)
					}
				}
			}
		}
		if s := g.Stats(); s.IdleClosed != 3 {
			t.Fatalf("stats %+v, want 3 idle closed", s)
		}
	})
}

func TestWhileSheddingTheRefusedShareMatches(t *testing.T) {
	for _, f := range []float64{0, 0.1, 0.3, 0.5, 0.9, 1} {
		synctest.Test(t, func(t *testing.T) {
			pl := newPipeListener()
			sig := new(share)
			sig.set(f)
			g := newGuard(t, sig, connguard.Unbounded, connguard.WithRefusal(connguard.Close))
			admitted := acceptor(g.Listener(pl))
			const n = 100
			var got []net.Conn
			for range n {
				_ = pl.dial()
				if c := recv(admitted); c != nil {
					got = append(got, c)
				}
			}
			want := int(float64(n) * (1 - f))
			if d := len(got) - want; d < -1 || d > 1 {
				t.Errorf("share %v: admitted %d of %d, want %d±1", f, len(got), n, want)
			}
			if s := g.Stats(); s.Shed+s.Accepted != n || s.Full != 0 {
				t.Errorf("share %v: stats %+v do not add up to %d", f, s, n)
			}
			for _, c := range got {
				_ = c.Close()
			}
			_ = pl.Close()
			synctest.Wait()
		})
	}
}

func TestShedConnectionsDoNotCountAgainstTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pl := newPipeListener()
		sig := new(share)
		sig.set(1)
		g := newGuard(t, sig, 1)
		admitted := acceptor(g.Listener(pl))
		answer := readAll(pl.dial())
		if recv(admitted) != nil {
			t.Fatal("admitted while shedding everything")
		}
		if got := <-answer; !strings.HasPrefix(got, "HTTP/1.1 503 ") || !strings.Contains(got, "Retry-After: 1\r\n") {
			t.Fatalf("shed connection read %q", got)
		}
		sig.set(0)
		pl.dial()
		c := recv(admitted)
		if c == nil {
			t.Fatal("not admitted once shedding stopped")
		}
		if s := g.Stats(); s.Shed != 1 || s.Accepted != 1 || s.Full != 0 {
			t.Fatalf("stats %+v", s)
		}
		_ = c.Close()
		_ = pl.Close()
		synctest.Wait()
	})
}

func TestNewRejectsBadSettings(t *testing.T) {
	for name, f := range map[string]func() (*connguard.Guard, error){
		"nil signal":     func() (*connguard.Guard, error) { return connguard.New(nil, 1) },
		"zero bound":     func() (*connguard.Guard, error) { return connguard.New(new(share), 0) },
		"negative bound": func() (*connguard.Guard, error) { return connguard.New(new(share), -1) },
		"nil option":     func() (*connguard.Guard, error) { return connguard.New(new(share), 1, nil) },
		"refusal":        func() (*connguard.Guard, error) { return connguard.New(new(share), 1, connguard.WithRefusal(7)) },
		"retry-after":    func() (*connguard.Guard, error) { return connguard.New(new(share), 1, connguard.WithRetryAfter(0)) },
	} {
		if _, err := f(); err == nil || !strings.HasPrefix(err.Error(), "connguard: ") {
			t.Errorf("%s: error %v, want one starting with connguard: ", name, err)
		}
	}
}
