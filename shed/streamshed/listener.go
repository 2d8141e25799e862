package streamshed

import (
	"context"
	"net"
	"net/netip"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/shed"
)

// Listener returns ln behind the Guard, for a server of raw streams (TCP,
// or TLS over it): its Accept decides every connection ln accepts, with
// the attempt f builds from it (nil: its remote address alone, an IPv6
// address grouped to its /64 as the HTTP middleware does), and closes a
// refused one at once, before anyone sees it. An admitted connection comes
// out tied to its Conn (see Conn.NetConn): closing it gives the permit
// back, and WithMaxLifetime closes it. No message of a raw stream is
// counted (the Guard cannot see its framing); a server that frames
// messages calls Open itself and Message for each.
//
// The listener's Accept returns ln's errors, and Open's error for a bad
// attempt (after closing that connection). It is as safe for concurrent
// use as ln is.
func (g *Guard) Listener(ln net.Listener, f func(net.Conn) shed.Attempt) net.Listener {
	if f == nil {
		f = peerAttempt
	}
	return &listener{Listener: ln, g: g, attempt: f}
}

type listener struct {
	net.Listener
	g       *Guard
	attempt func(net.Conn) shed.Attempt
}

// Accept waits for a connection the Guard admits; each one refused on the
// way is closed.
func (l *listener) Accept() (net.Conn, error) {
	for { // once per connection ln accepts
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, _, err := l.g.Open(context.Background(), l.attempt(nc))
		if c != nil {
			return c.NetConn(nc), nil
		}
		_ = nc.Close() // refused: nothing to say on a raw stream
		if err != nil {
			return nil, err
		}
	}
}

// peerAttempt is the attempt of a connection from its remote address.
func peerAttempt(nc net.Conn) shed.Attempt {
	var ap netip.AddrPort
	if tcp, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ap = tcp.AddrPort()
	} else if nc.RemoteAddr() != nil {
		ap, _ = netip.ParseAddrPort(nc.RemoteAddr().String())
	}
	ip := fingerprint.NormalizeAddr(ap.Addr())
	if ip.Is6() {
		if p, err := ip.Prefix(fingerprint.DefaultIPv6PrefixBits); err == nil {
			ip = p.Addr()
		}
	}
	return shed.Attempt{IP: ip}
}
