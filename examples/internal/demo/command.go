// Package demo is the harness the example programs share: their command
// line (-addr, -selftest), serving a handler on a loopback port with a
// client of it for a self-test, and reading replies whole, so that each
// example's main.go shows its scenario and nothing else.
package demo

import (
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

// Command is an example program's command line: it serves the example on
// -addr until the server fails, or with -selftest runs the example's
// self-test (which serves it on a loopback port, drives it and prints what
// happened) and exits. A Command is a value; its funcs are called once.
type Command struct {
	// Addr is the default of -addr, the listen address.
	Addr string
	// Drives says what the self-test does, for the help of -selftest:
	// "drive a short burst against itself".
	Drives string
	// SelfTest runs the self-test, printing to out.
	SelfTest func(out io.Writer) error
	// Serve returns the handler to serve on addr, after printing to out
	// what is served there and how to try it.
	Serve func(out io.Writer, addr string) (http.Handler, error)
	// Configure, when set, adjusts the server after Serve and before it
	// listens (its TLSConfig, its ConnContext); with a TLSConfig it serves
	// TLS, with the certificates that config holds.
	Configure func(*http.Server) error
	// Listener, when set, wraps the listener the server serves on (a
	// connguard.Guard's Listener), after Configure.
	Listener func(net.Listener) net.Listener
}

// Main runs c on the process's arguments, parsed by flag.CommandLine (on
// which the example may define flags of its own before calling Main), and
// exits with the error logged if there is one. It returns only after a
// self-test that passed.
func (c Command) Main() {
	if err := c.Run(flag.CommandLine, os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// Run adds -addr and -selftest to fs, parses args with it, and runs the
// self-test or serves. It returns the error of parsing, of the self-test,
// of Serve or of the server; serving, it blocks until the server fails.
func (c Command) Run(fs *flag.FlagSet, args []string, out io.Writer) error {
	addr := fs.String("addr", c.Addr, "listen address")
	selftest := fs.Bool("selftest", false, "serve on 127.0.0.1:0, "+c.Drives+", print what happened and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *selftest {
		return c.SelfTest(out)
	}
	h, err := c.Serve(out, *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	if c.Configure != nil {
		if err := c.Configure(srv); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if c.Listener != nil {
		ln = c.Listener(ln)
	}
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}
