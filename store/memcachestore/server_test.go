package memcachestore_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// requireMemcached reports whether a missing memcached fails the tests
// instead of skipping them.
func requireMemcached() bool { return os.Getenv("SLUICE_REQUIRE_MEMCACHED") == "1" }

// server is a private memcached a test starts on a free loopback port,
// killed when the test ends.
type server struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// startServer starts memcached with extra args, or skips the test when it
// is not installed (fails it under SLUICE_REQUIRE_MEMCACHED=1).
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if requireMemcached() {
			t.Fatalf("memcached is needed (SLUICE_REQUIRE_MEMCACHED=1): %v", err)
		}
		t.Skip("memcached not found (install it, or SLUICE_REQUIRE_MEMCACHED=1 to fail): skipping the tests that start their own")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &server{t: t, port: port}
	all := append([]string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "1"}, args...)
	if os.Geteuid() == 0 {
		all = append(all, "-u", "root")
	}
	s.cmd = exec.Command(bin, all...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	c := s.client()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("memcached on port %d does not answer", port)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// client returns a client of the server with a 100ms deadline per round
// trip.
func (s *server) client() *memcache.Client {
	c := memcache.New(s.addr())
	c.Timeout = 100 * time.Millisecond
	c.MaxIdleConns = 16
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *server) pause() {
	_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	// The signal is delivered asynchronously: wait (bounded) until the
	// kernel reports the process stopped, so that no request slips in.
	stat := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/stat"
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil { // no /proc: trust the signal
			return
		}
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the server (pid %d) did not stop", s.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *server) resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
