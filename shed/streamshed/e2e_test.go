package streamshed_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// wsServer serves an echo WebSocket behind g: each message is counted
// with Conn.Message before it is echoed, and the message "panic" makes
// the handler panic. ended is closed with each handler's end.
func wsServer(t *testing.T, g *streamshed.Guard, ended chan<- struct{}) *httptest.Server {
	t.Helper()
	echo := func(w http.ResponseWriter, r *http.Request) {
		conn := g.Accept(w, r)
		if conn == nil {
			return
		}
		defer conn.Done()
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		conn.Bind(func(code int, reason string) error { return ws.Close(websocket.StatusCode(code), reason) })
		for {
			typ, msg, err := ws.Read(r.Context())
			if err != nil || conn.Message() != nil {
				return
			}
			if string(msg) == "panic" {
				panic("handler panics")
			}
			if ws.Write(r.Context(), typ, msg) != nil {
				return
			}
		}
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }() // after the handler's own defers
		echo(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic's log line
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestRealWebSocketFloodIsClosedWith1008AfterTheBurst: over loopback, with
// time standing still, exactly the 50 messages of the burst are echoed, in
// order, and then the client reads the close 1008 with its reason; the
// connection's permit is back.
func TestRealWebSocketFloodIsClosedWith1008AfterTheBurst(t *testing.T) {
	clk := newFrozen()
	g, c := newGuard(t, clk.Now, streamshed.WithAttempt(byQuery))
	ended := make(chan struct{}, 1)
	srv := wsServer(t, g, ended)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/?user=alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	const sent = 60
	for i := range sent { // the server reads while we write; its echoes wait in the socket
		if err := ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "m%d", i)); err != nil {
			break // closed by the server: the rest is never sent
		}
	}
	echoed := 0
	for {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.HasPrefix(ce.Reason, "message rate exceeded") {
				t.Fatalf("after %d echoes: %v, want a close 1008", echoed, err)
			}
			break
		}
		if want := fmt.Sprintf("m%d", echoed); string(msg) != want {
			t.Fatalf("echo %q, want %q", msg, want)
		}
		echoed++
	}
	if echoed != streamshed.DefaultMessageBurst {
		t.Fatalf("%d echoed, want exactly the burst of %d", echoed, streamshed.DefaultMessageBurst)
	}
	<-ended
	if n := inflight(c); n != 0 {
		t.Fatalf("inflight %d after the handler ended", n)
	}
}

// TestRealWebSocketHandlerPanicGivesThePermitBack: a handler that panics
// mid-connection does not keep the user's connection permit.
func TestRealWebSocketHandlerPanicGivesThePermitBack(t *testing.T) {
	g, c := newGuard(t, nil, streamshed.WithAttempt(byQuery))
	ended := make(chan struct{}, 1)
	srv := wsServer(t, g, ended)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/?user=alice"
	for range 3 { // the limit is 2: a leaked permit would refuse the third
		ws, resp, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		if err := ws.Write(ctx, websocket.MessageText, []byte("panic")); err != nil {
			t.Fatal(err)
		}
		<-ended
		ws.CloseNow()
	}
	if s := c.Stats(); s.Inflight != 0 || s.Admitted != 3 {
		t.Fatalf("inflight %d, admitted %d", s.Inflight, s.Admitted)
	}
}

// byQuery is the attempt of a WebSocket request: the user from the query.
func byQuery(r *http.Request) shed.Attempt {
	return shed.Attempt{User: r.URL.Query().Get("user")}
}
