package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSelfTest drives the example with a real WebSocket client over
// loopback and checks each point it makes.
func TestSelfTest(t *testing.T) {
	got, err := selfTest(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got.third.ok || got.third.status != http.StatusTooManyRequests || got.third.retryAfter != "1" {
		t.Errorf("third connection: %+v, want 429 with Retry-After 1", got.third)
	}
	if got.stream != http.StatusTooManyRequests {
		t.Errorf("event stream at the user's limit: %d, want 429", got.stream)
	}
	if got.code != websocket.StatusPolicyViolation || !strings.HasPrefix(got.reason, "message rate exceeded") {
		t.Errorf("flood closed with %d %q, want 1008 and the reason", got.code, got.reason)
	}
	if got.echoed < 50 || got.echoed >= flood || got.sent < got.echoed {
		t.Errorf("flood: %d sent, %d echoed; want at least the burst of 50 echoed and the flood stopped", got.sent, got.echoed)
	}
	if !got.reopened.ok || !got.otherEchoed {
		t.Errorf("after the flood: reopened %+v, other connection echoes %v", got.reopened, got.otherEchoed)
	}
	if got.bobEvent != "data: tick 0" {
		t.Errorf("bob's first event %q", got.bobEvent)
	}
	if got.inflightAtExit != 0 {
		t.Errorf("%d permits held at exit", got.inflightAtExit)
	}
}
