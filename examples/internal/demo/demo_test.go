package demo_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers with the method, the X-Tenant header and the form's user.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Seen", r.Header.Get("X-Tenant"))
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, r.PostFormValue("user"))
})

// TestLoopbackReadsRepliesWhole: Get sends its header pairs, PostForm its
// form, and both hand back the status, header and whole body; Close leaves
// no goroutine behind (TestMain checks).
func TestLoopbackReadsRepliesWhole(t *testing.T) {
	srv, err := demo.Serve(echo)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("URL %q is not on loopback", srv.URL)
	}
	r, err := srv.Get("/a", "X-Tenant", "acme")
	if err != nil || r.Status != http.StatusAccepted || r.Header.Get("X-Seen") != "acme" || string(r.Body) != "GET /a " {
		t.Errorf("Get: %d %v %q, %v", r.Status, r.Header, r.Body, err)
	}
	r, err = srv.PostForm("/b", url.Values{"user": {"alice"}})
	if err != nil || r.Status != http.StatusAccepted || string(r.Body) != "POST /b alice" {
		t.Errorf("PostForm: %d %q, %v", r.Status, r.Body, err)
	}
	if _, err := srv.Get("/a", "X-Tenant"); err == nil {
		t.Error("Get took a header name without a value")
	}
}

// TestCommandRunsTheSelfTestOrServes: -selftest runs the self-test alone,
// printing to out; otherwise Serve gets -addr, Configure the server,
// Listener the listener it serves on, and a server that cannot listen
// there, or a failing Configure, is an error; a bad flag runs neither.
func TestCommandRunsTheSelfTestOrServes(t *testing.T) {
	var tested, served []string
	c := demo.Command{
		Addr:   "127.0.0.1:8080",
		Drives: "drive itself",
		SelfTest: func(out io.Writer) error {
			tested = append(tested, "run")
			_, err := io.WriteString(out, "self-tested")
			return err
		},
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			served = append(served, addr)
			return echo, nil
		},
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		fs := flag.NewFlagSet("example", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		err := c.Run(fs, args, &out)
		return out.String(), err
	}
	if out, err := run("-selftest"); err != nil || out != "self-tested" || len(tested) != 1 || len(served) != 0 {
		t.Fatalf("-selftest: %q, %v; self-tests %v, serves %v", out, err, tested, served)
	}
	if _, err := run("-addr", "127.0.0.1:-1"); err == nil || len(served) != 1 || served[0] != "127.0.0.1:-1" {
		t.Fatalf("serve on a bad address: %v; serves %v", err, served)
	}
	if _, err := run("-nope"); err == nil || len(tested) != 1 || len(served) != 1 {
		t.Fatalf("a bad flag: %v; self-tests %v, serves %v", err, tested, served)
	}
	configured := errors.New("configured")
	c.Configure = func(srv *http.Server) error {
		if srv.Addr != "127.0.0.1:-1" || srv.Handler == nil {
			t.Errorf("Configure got %q, %v", srv.Addr, srv.Handler)
		}
		return configured
	}
	if _, err := run("-addr", "127.0.0.1:-1"); !errors.Is(err, configured) {
		t.Fatalf("a failing Configure: %v", err)
	}
	c.Configure = nil
	// The server serves on the listener Listener wraps: here one whose
	// Accept fails at once, which ends Serve with its error.
	accepted := errors.New("accepted")
	c.Listener = func(ln net.Listener) net.Listener {
		if !strings.HasPrefix(ln.Addr().String(), "127.0.0.1:") {
			t.Errorf("Listener got %v", ln.Addr())
		}
		return failingListener{ln, accepted}
	}
	if _, err := run("-addr", "127.0.0.1:0"); !errors.Is(err, accepted) {
		t.Fatalf("serve on a wrapped listener: %v", err)
	}
	c.Listener = nil
	failing := errors.New("failing")
	c.SelfTest = func(io.Writer) error { return failing }
	if _, err := run("-selftest"); !errors.Is(err, failing) {
		t.Fatalf("a failing self-test: %v", err)
	}
}

// failingListener is a listener whose Accept fails with err (and closes
// the listener under it, so that nothing is left listening).
type failingListener struct {
	net.Listener
	err error
}

func (l failingListener) Accept() (net.Conn, error) {
	_ = l.Listener.Close()
	return nil, l.err
}

// TestAwait: Await reports a condition that comes to hold, and gives up on
// one that never does after its 10 s (on synctest's clock).
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		if !demo.Await(func() bool { n++; return n == 3 }) || n != 3 {
			t.Errorf("Await returned after %d looks, want 3", n)
		}
		if demo.Await(func() bool { return false }) {
			t.Error("Await reported a condition that never held")
		}
	})
}

func ExampleServe() {
	srv, err := demo.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.Header.Get("X-Tenant"))
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	r, err := srv.Get("/", "X-Tenant", "acme")
	fmt.Println(r.Status, string(r.Body), err)
	// Output: 200 hello, acme <nil>
}
