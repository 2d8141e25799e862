package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/shed/connguard"
)

const (
	// burst is how many requests the self-test pipelines at once.
	burst = 256
	// stampTries bounds the connections the self-test opens, one request
	// each, until an answer says how long its request waited.
	stampTries = 200
)

// result is what the self-test saw: whether the server knew when the
// requests arrived, the burst's statuses in order, the Retry-After of each
// 503, and the counters after it.
type result struct {
	arrivals   bool
	statuses   []int
	retryAfter []string
	// shedByWait is what Default shed for the wait; queueBound its queue
	// bound after the burst.
	shedByWait uint64
	queueBound time.Duration
	guard      connguard.Stats
}

// selfTest serves the protected endpoint on a loopback port behind its
// Guard, writes a burst of requests on one connection at once (pipelined:
// the server reads them together and runs them one after another, as a
// core does with requests that queue for it) and reads every answer. Each
// request's wait counts from when its bytes reached the host, so that
// those whose turn comes past Default's queue bound are shed at once
// instead of rendered late. Before the burst it opens connections, one
// request each, until an answer carries its wait: a host turns on receive
// timestamps some time after the first socket asks for them (deferred
// work), and what arrives before is not stamped.
func selfTest(out io.Writer) (result, error) {
	var res result
	p, err := newProtected()
	if err != nil {
		return res, err
	}
	defer p.ctl.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: p.handler, ReadHeaderTimeout: 5 * time.Second}
	p.guard.Install(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(p.guard.Listener(ln)) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()

	// A connection whose requests carry their wait: a new one each try.
	var (
		nc net.Conn
		br *bufio.Reader
	)
	for range stampTries {
		if nc, br, err = dial(ln.Addr().String()); err != nil {
			return res, err
		}
		resp, err := exchange(nc, br, "GET /thumb?img=warm-up HTTP/1.1\r\nHost: thumbnails\r\n\r\n")
		if err != nil {
			_ = nc.Close()
			return res, err
		}
		if res.arrivals = resp.Header.Get("Server-Timing") != ""; res.arrivals {
			break
		}
		_ = nc.Close()
		nc = nil
	}
	if nc == nil { // none was stamped: the burst on one more, to show what happens then
		if nc, br, err = dial(ln.Addr().String()); err != nil {
			return res, err
		}
	}
	defer nc.Close()
	var reqs bytes.Buffer
	for i := range burst {
		fmt.Fprintf(&reqs, "GET /thumb?img=%03d HTTP/1.1\r\nHost: thumbnails\r\n\r\n", i)
	}
	if _, err := nc.Write(reqs.Bytes()); err != nil {
		return res, err
	}
	for range burst {
		resp, err := exchange(nc, br, "")
		if err != nil {
			return res, fmt.Errorf("answer %d of %d: %w", len(res.statuses)+1, burst, err)
		}
		res.statuses = append(res.statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusServiceUnavailable {
			res.retryAfter = append(res.retryAfter, resp.Header.Get("Retry-After"))
		}
	}
	s := p.ctl.Stats()
	if len(s.Rules) != 1 {
		return res, errors.New("the Controller has no rule")
	}
	res.shedByWait, res.queueBound, res.guard = s.Rules[0].ShedByWait, s.Rules[0].QueueBound, p.guard.Stats()

	rendered, retry := 0, 0
	for _, st := range res.statuses {
		if st == http.StatusOK {
			rendered++
		}
	}
	for _, ra := range res.retryAfter {
		if ra != "" {
			retry++
		}
	}
	if !res.arrivals {
		fmt.Fprintln(out, "no arrival times on this system: the server cannot tell how long a request waited")
	}
	fmt.Fprintf(out, "%d requests written at once on one connection, about 2ms of CPU each to render:\n", burst)
	fmt.Fprintf(out, "  rendered (200):        %d\n", rendered)
	fmt.Fprintf(out, "  shed at once (503):    %d, %d of them with Retry-After\n", len(res.retryAfter), retry)
	fmt.Fprintf(out, "  shed for their wait:   %d: their turn came past Default's queue bound (%v now)\n", res.shedByWait, res.queueBound)
	fmt.Fprintf(out, "  answered by the Guard: %d before net/http read them (it does so for requests that reach an idle kept-alive connection, not for pipelined ones)\n", res.guard.EarlyAnswers)
	return res, nil
}

// dial opens a connection to addr with a deadline for the whole self-test,
// and a reader of its answers.
func dial(addr string) (net.Conn, *bufio.Reader, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	if err := nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		_ = nc.Close()
		return nil, nil, err
	}
	return nc, bufio.NewReader(nc), nil
}

// exchange writes req (nothing when empty) on nc and reads one answer whole
// from br.
func exchange(nc net.Conn, br *bufio.Reader, req string) (*http.Response, error) {
	if req != "" {
		if _, err := io.WriteString(nc, req); err != nil {
			return nil, err
		}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp, err
}
