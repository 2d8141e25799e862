package memcachestore_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/store/storetest"
)

// server is a private memcached a test starts on a free loopback port,
// killed when the test ends (pause, resume and kill are its Process's).
type server struct {
	*storetest.Process
	t    testing.TB
	port int
}

// startServer starts memcached with extra args, or skips the test when it
// is not installed (fails it under SLUICE_REQUIRE_MEMCACHED=1).
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		storetest.Missing(t, "SLUICE_REQUIRE_MEMCACHED", "memcached not found: skipping the tests that start their own", err)
	}
	s := &server{t: t, port: storetest.FreePort(t)}
	all := append([]string{"-l", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "0", "-t", "1"}, args...)
	if os.Geteuid() == 0 {
		all = append(all, "-u", "root")
	}
	s.Process = storetest.StartProcess(t, exec.Command(bin, all...))
	c := s.client()
	storetest.WaitReady(t, "memcached on port "+strconv.Itoa(s.port), 10*time.Second, func(context.Context) error { return c.Ping() })
	return s
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// client returns a client of the server with a deadline per round trip
// that a loaded machine meets; the tests of a paused server choose theirs
// with clientWithin.
func (s *server) client() *memcache.Client { return s.clientWithin(2 * time.Second) }

// clientWithin returns a client of the server with the deadline d per
// round trip.
func (s *server) clientWithin(d time.Duration) *memcache.Client {
	c := memcache.New(s.addr())
	c.Timeout = d
	c.MaxIdleConns = 16
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}
