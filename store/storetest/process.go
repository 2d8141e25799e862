package storetest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Missing skips t, or fails it when the environment variable require is
// "1" (as CI sets it), because what a test needs (a server, a binary) is
// missing: why says what and, with err, why. It does not return.
func Missing(t testing.TB, require, why string, err error) {
	t.Helper()
	if err != nil {
		why += ": " + err.Error()
	}
	if os.Getenv(require) == "1" {
		t.Fatalf("%s (%s=1)", why, require)
	}
	t.Skipf("%s (set %s=1 to fail)", why, require)
}

// FreePort returns a TCP port of the loopback that was free a moment ago,
// for a server a test starts on it.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Process is a server process a test started for itself (never a shared
// one): paused and resumed for fault tests, and killed when the test ends.
// Its methods are for the test's goroutine.
type Process struct {
	t   testing.TB
	cmd *exec.Cmd
}

// StartProcess starts cmd and kills it when the test ends; it fails the
// test when cmd does not start.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{t: t, cmd: cmd}
	t.Cleanup(p.Kill)
	return p
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pause stops the process (SIGSTOP): its connections stay open and nothing
// answers. The signal is delivered asynchronously, so it waits (bounded)
// until the kernel reports the process stopped, that no request slips in;
// where there is no /proc it trusts the signal.
func (p *Process) Pause() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	stat := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat"
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			return
		}
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("storetest: the server (pid %d) did not stop", p.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() {
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Kill kills the process (SIGKILL, after a SIGCONT so that a paused one
// can die) and waits for it to exit; killing it again does nothing.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// WaitReady calls ready until it returns nil, at most for within, and
// fails the test with ready's last error (and what, naming the server)
// when it never does. Each call gets a context of its own, ended after
// half a second.
func WaitReady(t testing.TB, what string, within time.Duration, ready func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := ready(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("storetest: %s does not answer: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// MustRegister registers spec on s and fails the test on an error.
func MustRegister(t testing.TB, s store.Store, spec store.Spec) store.LimitID {
	t.Helper()
	id, err := s.Register(context.Background(), spec)
	if err != nil {
		t.Fatalf("Register(%+v): %v", spec, err)
	}
	return id
}

// Decide decides one hit of cost on key of limit id and fails the test on
// an error.
func Decide(t testing.TB, s store.Store, id store.LimitID, key string, cost int64) *store.Result {
	t.Helper()
	var req store.Request
	req.Add(id, key, cost)
	res := new(store.Result)
	if err := s.Decide(context.Background(), &req, res); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}
