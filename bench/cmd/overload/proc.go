package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is one re-executed role: its own process group, killed whole when
// it is closed, with its stdout read line by line.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// pinning is where the two roles run: the taskset CPU lists of the server
// and of the load generator ("" for not pinned).
type pinning struct {
	server, load string
}

// planPinning gives the server the first procs CPUs and the load generator
// the rest; what cannot be pinned is said in warnings.
func planPinning(procs, ncpu int, haveTaskset bool) (pinning, []string) {
	if !haveTaskset {
		return pinning{}, []string{"taskset not found: server and load generator are not pinned and share the CPUs"}
	}
	if procs >= ncpu {
		return pinning{server: fmt.Sprintf("0-%d", ncpu-1)}, []string{fmt.Sprintf("the server's %d CPUs leave none of %d for the load generator: it runs unpinned on the server's CPUs", procs, ncpu)}
	}
	return pinning{server: cpuList(0, procs-1), load: cpuList(procs, ncpu-1)}, nil
}

func cpuList(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// startChild starts self with args, pinned to cpus when cpus is not empty,
// with self.env and env added to the environment. The child is killed (its
// whole process group) when ctx ends or close is called.
func startChild(ctx context.Context, self selfCmd, cpus string, env []string, args ...string) (*child, error) {
	argv := append(append([]string(nil), self.argv...), args...)
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), self.env...), env...)
	cmd.Stderr = os.Stderr
	// Its own group, so that the kill reaches whatever it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("overload: start %s: %w", strings.Join(argv, " "), err)
	}
	if self.started != nil {
		self.started(cmd.Process.Pid)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c, nil
}

// expect waits up to d for a line starting with prefix and returns the
// rest; other lines are skipped.
func (c *child) expect(prefix string, d time.Duration) (string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("overload: %s exited before %q", c.cmd.Path, prefix)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest, nil
			}
		case <-t.C:
			return "", fmt.Errorf("overload: no %q from %s within %v", prefix, c.cmd.Path, d)
		}
	}
}

// close kills the child's process group and reaps it.
func (c *child) close() {
	_ = c.stdin.Close()
	if c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = c.cmd.Wait()
	for range c.lines {
	}
}
