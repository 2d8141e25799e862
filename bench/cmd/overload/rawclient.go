package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// rawClient is a lean HTTP/1.1 client for the load role: GET requests on
// kept-alive connections, one request at a time per connection, a new
// connection when none is idle, and the connection closed when a request
// times out or the server asks (Connection: close), as net/http's
// Transport does. It exists because the Transport costs the load
// generator tens of microseconds of CPU per request: on one core it could
// not send much more than 6,000 requests a second, so that at 10x the CPU
// endpoint's capacity the generator, not the server, fell behind (an
// empty 200 handler with no protection answered 713 of 4,035 requests
// late or not at all at 7,000 a second in one run), and its late requests
// timed out and redialled into a dial storm that no server could cause or
// prevent. Safe for concurrent use.
type rawClient struct {
	addr  string
	req   []byte // the whole request, sent as is
	dials *atomic.Int64

	mu     sync.Mutex
	idle   []*rawConn
	busy   map[*rawConn]struct{}
	closed bool
}

// rawConn is one connection with its reader.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

// newRawClient returns a client of the URL rawURL (http only), counting
// its dials in dials.
func newRawClient(rawURL string, dials *atomic.Int64) (*rawClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("overload: the raw client speaks http:// only, got %q", rawURL)
	}
	path := u.RequestURI()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: sluice-overload\r\n\r\n"
	return &rawClient{addr: u.Host, req: []byte(req), dials: dials, busy: map[*rawConn]struct{}{}}, nil
}

// errClientClosed is what a request gets when the client closed under it.
var errClientClosed = errors.New("overload: client closed")

// do sends one GET that must be answered by deadline and returns the
// status. A request that is not answered in time returns an error that
// is context.DeadlineExceeded, and its connection is closed (the server
// sees the client go, as with net/http).
func (rc *rawClient) do(deadline time.Time) (int, error) {
	c, err := rc.take(deadline)
	if err != nil {
		return 0, err
	}
	status, keep, err := c.roundTrip(rc.req, deadline)
	if err != nil {
		rc.drop(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return 0, err
	}
	if keep {
		rc.put(c)
	} else {
		rc.drop(c)
	}
	return status, nil
}

// take returns an idle connection, the latest first, or dials one.
func (rc *rawClient) take(deadline time.Time) (*rawConn, error) {
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return nil, errClientClosed
	}
	if n := len(rc.idle); n > 0 {
		c := rc.idle[n-1]
		rc.idle = rc.idle[:n-1]
		rc.busy[c] = struct{}{}
		rc.mu.Unlock()
		return c, nil
	}
	rc.mu.Unlock()
	rc.dials.Add(1)
	d := net.Dialer{Deadline: deadline}
	nc, err := d.Dial("tcp", rc.addr)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	c := &rawConn{c: nc, br: bufio.NewReaderSize(nc, 4096)}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		nc.Close()
		return nil, errClientClosed
	}
	rc.busy[c] = struct{}{}
	return c, nil
}

func (rc *rawClient) put(c *rawConn) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	delete(rc.busy, c)
	if rc.closed {
		c.c.Close()
		return
	}
	rc.idle = append(rc.idle, c)
}

func (rc *rawClient) drop(c *rawConn) {
	rc.mu.Lock()
	delete(rc.busy, c)
	rc.mu.Unlock()
	c.c.Close()
}

// close closes every connection: idle ones at once, busy ones by moving
// their deadline to now, so that every request still out returns.
func (rc *rawClient) close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.closed = true
	for _, c := range rc.idle {
		c.c.Close()
	}
	rc.idle = nil
	for c := range rc.busy {
		c.c.SetDeadline(time.Now())
	}
}

// roundTrip writes req and reads one response, discarding its body. keep
// reports whether the connection may carry another request.
func (c *rawConn) roundTrip(req []byte, deadline time.Time) (status int, keep bool, err error) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return 0, false, err
	}
	if _, err := c.c.Write(req); err != nil {
		return 0, false, err
	}
	return readResponse(c.br)
}

// readResponse reads one HTTP/1.1 response from br: its status, whether
// the connection stays open, and its body (by Content-Length or chunked),
// which it discards.
func readResponse(br *bufio.Reader) (status int, keep bool, err error) {
	line, err := readLine(br)
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, fmt.Errorf("overload: malformed status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("overload: malformed status line %q", line)
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		h, err := readLine(br)
		if err != nil {
			return 0, false, err
		}
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("overload: malformed header %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return 0, false, fmt.Errorf("overload: bad Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	switch {
	case status/100 == 1 || status == 204 || status == 304:
		// no body
	case chunked:
		err = discardChunked(br)
	case length >= 0:
		_, err = br.Discard(int(length))
	default:
		// Until the server closes the connection.
		keep = false
		for err == nil {
			_, err = br.Discard(br.Buffered() + 1)
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	return status, keep, err
}

// discardChunked reads a chunked body and its trailer.
func discardChunked(br *bufio.Reader) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("overload: bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailer fields, then the blank line
				t, err := readLine(br)
				if err != nil || len(t) == 0 {
					return err
				}
			}
		}
		if _, err := br.Discard(int(n)); err != nil {
			return err
		}
		if t, err := readLine(br); err != nil || len(t) != 0 {
			if err == nil {
				err = fmt.Errorf("overload: chunk not followed by CRLF")
			}
			return err
		}
	}
}

// readLine returns one line without its CRLF; the slice is valid until
// the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}
