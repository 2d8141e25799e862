package mysqlstore_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// server is a private mariadbd a test starts in a temporary directory on a
// free loopback port, without grant tables (root, no password), killed
// when the test ends.
type server struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// startServer starts a private mariadbd with a database test, or skips the
// test when MariaDB's binaries are missing (fails it under
// SLUICE_REQUIRE_MYSQL=1).
func startServer(t testing.TB) *server {
	t.Helper()
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(bin); err != nil {
			if requireMySQL() {
				t.Fatalf("%s is needed (SLUICE_REQUIRE_MYSQL=1): %v", bin, err)
			}
			t.Skipf("%s not found: skipping the tests that start their own MariaDB", bin)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &server{t: t, port: port, dir: t.TempDir()}
	data := filepath.Join(s.dir, "data")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := os.Mkdir(filepath.Join(data, "test"), 0o700); err != nil {
		t.Fatal(err) // a database is a directory
	}
	s.cmd = exec.Command("mariadbd", "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(s.dir, "sock"),
		"--pid-file="+filepath.Join(s.dir, "pid"), "--skip-grant-tables", "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M", "--log-error="+filepath.Join(s.dir, "log"))
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	db := openDB(t, s.dsn())
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			t.Fatalf("mariadbd on port %d does not answer: %v\n%s", port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// currentUser is the user mariadbd runs as: root must say so.
func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

func (s *server) dsn() string {
	return "root@tcp(127.0.0.1:" + strconv.Itoa(s.port) + ")/test?timeout=1s"
}

// pause stops the process (SIGSTOP): connections stay open, nothing
// answers. resume continues it.
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

// kill kills the server and waits for it to exit.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server must be able to die
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
