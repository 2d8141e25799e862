package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// startServer serves h behind p as the server role does and returns its
// base URL; the server is closed when t ends.
func startServer(t *testing.T, p *protection, h http.Handler) string {
	t.Helper()
	var conns atomic.Int64
	srv, ln, err := newServer(p, h, "1", 0, &conns)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, c *http.Client, url string) (int, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// TestGuardContenderClosesIdleFirstAndRefusesAtTheBound: the guard
// contender's Guard sits on the server's listener and sees its ConnState:
// at its bound of one connection, a new connection takes the place of an
// idle one, and is refused at accept (a 503 the handler never sees) while
// the one it holds is active.
func TestGuardContenderClosesIdleFirstAndRefusesAtTheBound(t *testing.T) {
	p, err := newProtection(guardName, protectionConfig{static: 1, proto: "1", guardConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	idle := make(chan struct{}, 4)
	track := p.connState
	p.connState = func(c net.Conn, s http.ConnState) {
		track(c, s)
		if s == http.StateIdle {
			idle <- struct{}{}
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var handled atomic.Int64
	url := startServer(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		if r.URL.Path == "/hold" {
			close(entered)
			<-release
		}
	}))
	client := func() *http.Client { return &http.Client{Transport: &http.Transport{}} }

	a := client()
	if code, err := get(t, a, url+"/"); err != nil || code != http.StatusOK {
		t.Fatalf("first connection: %d, %v; want 200", code, err)
	}
	<-idle // the Guard saw it go idle
	held := make(chan error, 1)
	go func() {
		code, err := get(t, client(), url+"/hold")
		if err == nil && code != http.StatusOK {
			err = errors.New(http.StatusText(code))
		}
		held <- err
	}()
	<-entered // the second connection is active, in place of the idle one
	if st := p.guard.Stats(); st.IdleClosed != 1 || st.Accepted != 2 || st.Open != 1 {
		t.Errorf("after the second connection: %+v, want 2 accepted, 1 idle closed, 1 open", st)
	}
	code, err := get(t, client(), url+"/")
	st := p.guard.Stats()
	switch {
	case st.Full != 1:
		t.Errorf("third connection: %+v, want it refused at the bound", st)
	case st.Unanswered == 0 && (err != nil || code != http.StatusServiceUnavailable):
		t.Errorf("third connection, answered: %d, %v; want the Guard's 503", code, err)
	case st.Unanswered == 1 && err == nil:
		t.Errorf("third connection, closed unanswered, got an answer %d", code)
	}
	close(release)
	if err := <-held; err != nil {
		t.Errorf("held request: %v", err)
	}
	if n := handled.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2: the refused connection reached it", n)
	}
}

// TestRefuseContenderAnswersEveryConnectionAtAccept: the rejection-cost
// contender that refuses at accept answers every connection itself (a
// 503, or a close when the request has not arrived yet), and the handler
// never runs.
func TestRefuseContenderAnswersEveryConnectionAtAccept(t *testing.T) {
	p, err := newProtection(refuseName, protectionConfig{static: 1, proto: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	url := startServer(t, p, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const n = 20
	var shed, failed uint64
	for range n {
		code, err := get(t, c, url+"/")
		switch {
		case err != nil:
			failed++
		case code == http.StatusServiceUnavailable:
			shed++
		default:
			t.Errorf("answered %d, want 503", code)
		}
	}
	st := p.guard.Stats()
	if st.Shed != n || st.Accepted != 0 {
		t.Errorf("%+v, want all %d connections shed at accept, none accepted", st, n)
	}
	if answered := st.Shed - st.Unanswered - st.WriteErrors; answered != shed || st.Unanswered+st.WriteErrors != failed {
		t.Errorf("client saw %d 503s and %d failures; the Guard answered %d (%+v)", shed, failed, answered, st)
	}
}

// TestPauseContendersServeThroughAPacedListener: each pause contender's
// Guard sits on the server's listener and serves a request while nothing
// is shed; the all-or-nothing one's Signal sheds everything at any share.
func TestPauseContendersServeThroughAPacedListener(t *testing.T) {
	for _, name := range []string{pauseName, pauseIdleName, pauseConnName, pauseCloseName, pauseAllName} {
		t.Run(name, func(t *testing.T) {
			p, err := newProtection(name, protectionConfig{static: 1, proto: "1"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			url := startServer(t, p, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			for range 3 {
				if code, err := get(t, c, url+"/"); err != nil || code != http.StatusOK {
					t.Fatalf("%d, %v; want 200", code, err)
				}
			}
			if st := p.guard.Stats(); st.Accepted != 3 || st.Shed != 0 {
				t.Fatalf("%+v, want 3 accepted", st)
			}
		})
	}
	for f, want := range map[float64]float64{0: 0, 0.01: 1, 0.5: 1} {
		if got := (anyShed{fixedSignal(f)}).Shedding(); got != want {
			t.Errorf("all or nothing at %v: %v, want %v", f, got, want)
		}
	}
}

type fixedSignal float64

func (f fixedSignal) Shedding() float64 { return float64(f) }
