package storetest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

// TestProcessPausesAndDies: a paused process is stopped when Pause
// returns (no request slips in), runs again after Resume, and Kill ends it
// however it stands; the kernel is read through /proc.
func TestProcessPausesAndDies(t *testing.T) {
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to read a process's state from")
	}
	p := storetest.StartProcess(t, exec.Command(bin, "600"))
	state := func() byte {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] == ')' {
				return b[i+2]
			}
		}
		t.Fatalf("no state in %q", b)
		return 0
	}
	p.Pause()
	if s := state(); s != 'T' {
		t.Fatalf("paused: state %c, want T", s)
	}
	p.Resume()
	storetest.WaitReady(t, "the resumed process", 5*time.Second, func(context.Context) error {
		if state() == 'T' {
			return errors.New("still stopped")
		}
		return nil
	})
	p.Pause()
	p.Kill()
	p.Kill()
}

// TestFreePortIsFree: the port FreePort returns can be listened on.
func TestFreePortIsFree(t *testing.T) {
	port := storetest.FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	_ = l.Close()
}

// TestLogBufferTakesConcurrentWrites: lines written from several
// goroutines all arrive whole (the race detector watches the rest).
func TestLogBufferTakesConcurrentWrites(t *testing.T) {
	var b storetest.LogBuffer
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if n := strings.Count(b.String(), "line\n"); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
}
