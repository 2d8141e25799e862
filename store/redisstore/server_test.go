package redisstore_test

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a private redis-server a test starts on a free port, in a
// temporary directory, without persistence; stopped when the test ends.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// redisBinaries returns the paths of redis-server and redis-cli, or skips
// the test when they are missing (fails it under SLUICE_REQUIRE_REDIS=1).
func redisBinaries(t testing.TB) (string, string) {
	t.Helper()
	srv, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		if requireRedis() {
			t.Fatalf("redis-server and redis-cli are needed (SLUICE_REQUIRE_REDIS=1): %v %v", err1, err2)
		}
		t.Skip("redis-server or redis-cli not found: skipping the tests that start their own Redis")
	}
	return srv, cli
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts a redis-server with extra config args.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	redisBinaries(t)
	s := &server{t: t, port: freePort(t), dir: t.TempDir(), args: args}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", s.dir, "--protected-mode", "no"}, s.args...)
	cmd := exec.Command("redis-server", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			if !closed && strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
				closed = true
			}
		}
		if !closed {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("redis-server on port %d did not start", s.port)
	}
	s.waitPing()
}

// waitPing waits (bounded) until the server answers.
func (s *server) waitPing() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d does not answer: %v", s.port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill kills the server (SIGKILL) and waits for it to exit.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server must be able to die
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *server) stop() { s.kill() }

// pause stops the process (SIGSTOP); resume continues it.
func (s *server) pause() { s.signal(syscall.SIGSTOP) }

func (s *server) resume() { s.signal(syscall.SIGCONT) }

func (s *server) signal(sig syscall.Signal) {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// restart kills the server and starts an empty one on the same port.
func (s *server) restart() {
	s.kill()
	s.start()
}
