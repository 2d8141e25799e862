//go:build !linux

package connguard

import "net"

// deferAccept leaves ln as it is where the kernel has no TCP_DEFER_ACCEPT.
func deferAccept(net.Listener) {}

// setBacklog leaves ln as it is: elsewhere than on Linux, calling listen(2)
// again on a listening socket is not known to shrink its accept queue.
func setBacklog(net.Listener, int) {}
