//go:build !unix

package connguard

import "net"

// drain reads nothing where a non-blocking read of a socket is not at
// hand, and takes the request to have arrived: a refused connection with
// unread request bytes may be reset on close.
func drain(net.Conn) bool { return true }
