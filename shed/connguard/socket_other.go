//go:build !linux

package connguard

import "net"

// deferAccept leaves ln as it is where the kernel has no TCP_DEFER_ACCEPT.
func deferAccept(net.Listener) {}

// stampArrivals leaves ln as it is: no receive timestamps here.
func stampArrivals(net.Listener) bool { return false }

// setBacklog leaves ln as it is: elsewhere than on Linux, calling listen(2)
// again on a listening socket is not known to shrink its accept queue.
func setBacklog(net.Listener, int) {}

// arrivals is the arrival timing of a connection, which this system does
// not provide.
type arrivals struct{}

// timeArrivals returns nil: no receive timestamps here.
func timeArrivals(net.Conn, bool) *arrivals { return nil }

func (*arrivals) read([]byte) (int, error) { panic("connguard: no arrival timing here") }

func (*arrivals) lastArrival() int64 { return 0 }
