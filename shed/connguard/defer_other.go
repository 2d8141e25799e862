//go:build !linux

package connguard

import "net"

// deferAccept leaves ln as it is where the kernel has no TCP_DEFER_ACCEPT.
func deferAccept(net.Listener) {}
