package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store/storetest"
)

// server is a private redis-server a test starts on a free port, in a
// temporary directory, without persistence; stopped when the test ends.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	proc *storetest.Process // the running redis-server, nil once killed
}

// redisBinaries returns the paths of redis-server and redis-cli, or skips
// the test when they are missing (fails it under SLUICE_REQUIRE_REDIS=1).
func redisBinaries(t testing.TB) (string, string) {
	t.Helper()
	srv, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err := errors.Join(err1, err2); err != nil {
		storetest.Missing(t, "SLUICE_REQUIRE_REDIS", "redis-server or redis-cli not found: skipping the tests that start their own Redis", err)
	}
	return srv, cli
}

// startServer starts a redis-server with extra config args.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	redisBinaries(t)
	s := &server{t: t, port: storetest.FreePort(t), dir: t.TempDir(), args: args}
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
	s.proc = storetest.StartProcess(s.t, cmd)
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
	storetest.WaitReady(s.t, "redis-server on port "+strconv.Itoa(s.port), 10*time.Second, func(ctx context.Context) error { return c.Ping(ctx).Err() })
}

// kill kills the server (SIGKILL) and waits for it to exit.
func (s *server) kill() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

func (s *server) stop() { s.kill() }

// pause stops the process (SIGSTOP); resume continues it.
func (s *server) pause() {
	if s.proc != nil {
		s.proc.Pause()
	}
}

func (s *server) resume() {
	if s.proc != nil {
		s.proc.Resume()
	}
}

// restart kills the server and starts an empty one on the same port.
func (s *server) restart() {
	s.kill()
	s.start()
}
