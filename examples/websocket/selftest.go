package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// flood is how many messages the self-test sends on one connection as
// fast as it can: far more than the 50 at once and 10 a second that a slow
// machine could refill while they are sent.
const flood = 500

// result is what the self-test saw.
type result struct {
	third          dialed // alice's third WebSocket while two are open
	stream         int    // status of alice's event stream then
	sent, echoed   int    // messages of the flood written, and echoed back in order
	code           websocket.StatusCode
	reason         string // the close of the flooded connection
	reopened       dialed // alice's connection once the flooded one is closed
	otherEchoed    bool   // alice's other connection still echoes
	bobEvent       string // the first event of bob's stream
	inflightAtExit int64
}

// dialed is the outcome of one WebSocket handshake.
type dialed struct {
	ok         bool
	status     int
	retryAfter string
}

// selfTest serves the endpoints on 127.0.0.1:0 and drives them with a real
// WebSocket client: alice opens two connections, a third and an event
// stream are refused, one connection is flooded until it is closed with
// 1008, and afterwards alice connects again. It returns an error when any
// step does not show its point.
func selfTest(out io.Writer) (result, error) {
	var res result
	h, sluice, err := newHandler()
	if err != nil {
		return res, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return res, err
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/echo?user="
	dial := func(user string) (*websocket.Conn, dialed) {
		ws, resp, err := websocket.Dial(ctx, wsURL+user, nil)
		d := dialed{ok: err == nil}
		if resp != nil {
			d.status, d.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
			if resp.Body != nil {
				resp.Body.Close()
			}
		}
		return ws, d
	}

	fmt.Fprintf(out, "alice opens two WebSockets on %s\n", wsURL+"alice")
	a, da := dial("alice")
	b, db := dial("alice")
	if !da.ok || !db.ok {
		return res, fmt.Errorf("websocket: alice's first two connections: %+v %+v", da, db)
	}
	defer a.CloseNow()
	defer b.CloseNow()
	c, third := dial("alice")
	if c != nil {
		c.CloseNow()
	}
	res.third = third
	fmt.Fprintf(out, "  a third one: %d, Retry-After: %s\n", third.status, third.retryAfter)
	r, err := srv.Get("/events?user=alice")
	if err != nil {
		return res, err
	}
	res.stream = r.Status
	fmt.Fprintf(out, "  an event stream counts as a connection too: %d\n", r.Status)
	if third.ok || third.status != http.StatusTooManyRequests || r.Status != http.StatusTooManyRequests {
		return res, fmt.Errorf("websocket: alice's third connection was not refused: %+v, stream %d", third, r.Status)
	}

	fmt.Fprintf(out, "alice floods one connection with %d messages; the server echoes each one it takes\n", flood)
	res.sent, res.echoed, res.code, res.reason = floodConn(ctx, a)
	fmt.Fprintf(out, "  sent %d, echoed %d in order, then closed: %d %q\n", res.sent, res.echoed, res.code, res.reason)
	if res.code != websocket.StatusPolicyViolation || res.echoed < 50 || res.echoed >= flood {
		return res, fmt.Errorf("websocket: the flood was not stopped with 1008 after the burst: %d echoed, close %d", res.echoed, res.code)
	}

	// The flooded connection's permit is back once the server has closed it.
	if !demo.Await(func() bool { return sluice.Stats().Inflight == 1 }) {
		return res, errors.New("websocket: the flooded connection's permit never came back")
	}
	c, res.reopened = dial("alice")
	if !res.reopened.ok {
		return res, fmt.Errorf("websocket: alice cannot connect again after the flood: %+v", res.reopened)
	}
	defer c.CloseNow()
	res.otherEchoed = echoOnce(ctx, b)
	fmt.Fprintf(out, "alice connects again: ok; her other connection still echoes: %v\n", res.otherEchoed)
	if !res.otherEchoed {
		return res, errors.New("websocket: alice's other connection was hurt by the flood")
	}

	res.bobEvent, err = firstEvent(ctx, srv, "/events?user=bob")
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "bob's event stream: %q\n", res.bobEvent)

	b.Close(websocket.StatusNormalClosure, "")
	c.Close(websocket.StatusNormalClosure, "")
	if !demo.Await(func() bool { return sluice.Stats().Inflight == 0 }) {
		return res, fmt.Errorf("websocket: %d permits still held after every connection closed", sluice.Stats().Inflight)
	}
	res.inflightAtExit = sluice.Stats().Inflight
	fmt.Fprintln(out, "every connection closed: no permit held")
	return res, nil
}

// floodConn writes flood messages to ws without waiting, while it reads the
// echoes until the connection closes. It returns how many were written, how
// many came back in order, and the close status and reason.
func floodConn(ctx context.Context, ws *websocket.Conn) (sent, echoed int, code websocket.StatusCode, reason string) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range flood {
			if ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "m%d", i)) != nil {
				return // the connection is closed
			}
			sent++
		}
	})
	code, reason = -1, ""
	for {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				code, reason = ce.Code, ce.Reason
			} else {
				reason = err.Error()
			}
			break
		}
		if string(msg) != fmt.Sprintf("m%d", echoed) {
			reason = fmt.Sprintf("echo %q out of order", msg)
			break
		}
		echoed++
	}
	ws.CloseNow() // ends the writer, if the server did not
	wg.Wait()
	return sent, echoed, code, reason
}

// echoOnce reports whether ws echoes one message.
func echoOnce(ctx context.Context, ws *websocket.Conn) bool {
	if ws.Write(ctx, websocket.MessageText, []byte("hello")) != nil {
		return false
	}
	_, msg, err := ws.Read(ctx)
	return err == nil && string(msg) == "hello"
}

// firstEvent opens the event stream at path and returns its first data
// line, then goes away.
func firstEvent(ctx context.Context, srv *demo.Loopback, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := srv.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("websocket: event stream %s: %d", path, resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	return strings.TrimSpace(line), err
}
