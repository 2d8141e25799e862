package streamshed

import "net"

// NetConn ties c to nc, a connection without close codes (an accepted TCP
// connection, a hijacked HTTP one): it binds a CloseFunc that closes nc,
// so that the Guard's ends (a message over the limit, the context's end,
// the maximum lifetime) close it, and returns nc wrapped so that its Close
// also ends c (Done). The wrapper's other methods are nc's; a stream's
// messages are whatever its framing says, so its reader still calls
// c.Message for each one.
func (c *Conn) NetConn(nc net.Conn) net.Conn {
	c.Bind(func(int, string) error { return nc.Close() })
	return &netConn{Conn: nc, c: c}
}

// netConn is a net.Conn whose Close ends its Conn.
type netConn struct {
	net.Conn
	c *Conn
}

// Close closes the connection and ends its Conn, which gives the permit
// back once the connection is closed.
func (n *netConn) Close() error {
	err := n.Conn.Close()
	n.c.Done()
	return err
}
