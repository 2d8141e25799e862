package streamshed

import (
	"net"
	"net/netip"
	"testing"
)

// addrConn is a net.Conn with a remote address and nothing else.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestPeerAttemptGroupsIPv6AndFoldsMappedIPv4: one key per IPv6 /64 and one
// spelling per IPv4 host, as the HTTP middleware keys them.
func TestPeerAttemptGroupsIPv6AndFoldsMappedIPv4(t *testing.T) {
	for remote, want := range map[string]string{
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::",
		"[::ffff:192.0.2.7]:80":      "192.0.2.7",
		"192.0.2.8:80":               "192.0.2.8",
	} {
		ap := netip.MustParseAddrPort(remote)
		got := peerAttempt(addrConn{remote: net.TCPAddrFromAddrPort(ap)}).IP
		if got != netip.MustParseAddr(want) {
			t.Errorf("%s: %v, want %s", remote, got, want)
		}
	}
	if got := peerAttempt(addrConn{remote: &net.UnixAddr{Name: "@x", Net: "unix"}}).IP; got.IsValid() {
		t.Errorf("a unix peer: %v, want the zero Addr (ip:unknown)", got)
	}
}
