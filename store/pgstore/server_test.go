package pgstore_test

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/store/storetest"
)

// pgBins is where the PostgreSQL server binaries are looked for besides
// PATH and SLUICE_PG_BIN: Debian's layout, any version.
const pgBins = "/usr/lib/postgresql/*/bin"

// server is a private PostgreSQL a test starts with initdb and pg_ctl in a
// temporary directory, on a free port of the loopback, without fsync;
// stopped (immediately) when the test ends. The shared server is never
// touched.
type server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// as runs a command as the postgres user when the test runs as root
	// (the server refuses to run as root).
	as []string
}

// startServer initializes and starts a private server, or skips the test
// when the binaries are missing (fails it under SLUICE_REQUIRE_POSTGRES=1).
func startServer(t testing.TB) *server {
	t.Helper()
	s := &server{t: t}
	installed, _ := filepath.Glob(pgBins)
	dirs := append([]string{os.Getenv("SLUICE_PG_BIN")}, installed...)
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		dirs = append([]string{filepath.Dir(p)}, dirs...)
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			s.bin = d
			break
		}
	}
	skip := func(why string) {
		storetest.Missing(t, "SLUICE_REQUIRE_POSTGRES", "skipping the tests that start their own PostgreSQL: "+why, nil)
	}
	if s.bin == "" {
		skip("initdb not found (set SLUICE_PG_BIN)")
	}
	// Not t.TempDir: its parent is private to this user, and the server
	// may run as another.
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skip("running as root and there is no postgres user to run the server as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.as = []string{"runuser", "-u", "postgres", "--"}
	}
	s.port = storetest.FreePort(t)
	s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-N", "-E", "UTF8")
	s.start()
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *server) data() string { return filepath.Join(s.dir, "data") }

// url is the server's connection string (database postgres).
func (s *server) url() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(s.port) + "/postgres?sslmode=disable&connect_timeout=2"
}

func (s *server) run(name string, args ...string) {
	s.t.Helper()
	argv := append(append(append([]string{}, s.as...), filepath.Join(s.bin, name)), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// start starts the server and waits until it accepts connections.
func (s *server) start() {
	s.t.Helper()
	s.run("pg_ctl", "-D", s.data(), "-w", "-l", filepath.Join(s.dir, "log"), "-o",
		"-p "+strconv.Itoa(s.port)+" -k "+s.dir+" -c listen_addresses=127.0.0.1 -c fsync=off", "start")
}

// stop stops the server at once, as a crash does (its sessions are
// dropped; what was committed survives).
func (s *server) stop() {
	s.t.Helper()
	argv := append(append([]string{}, s.as...), filepath.Join(s.bin, "pg_ctl"), "-D", s.data(), "-m", "immediate", "-w", "stop")
	_ = exec.Command(argv[0], argv[1:]...).Run() // not running: nothing to stop
}
