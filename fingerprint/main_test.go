package fingerprint

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the loopback TLS servers of the handshake tests leave
// no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
