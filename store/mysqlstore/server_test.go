package mysqlstore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

// server is a private mariadbd a test starts in a temporary directory on a
// free loopback port, without grant tables (root, no password), killed
// when the test ends (pause, resume and kill are its Process's).
type server struct {
	*storetest.Process
	port int
	dir  string
}

// startServer starts a private mariadbd with a database test, or skips the
// test when MariaDB's binaries are missing (fails it under
// SLUICE_REQUIRE_MYSQL=1).
func startServer(t testing.TB) *server {
	t.Helper()
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(bin); err != nil {
			storetest.Missing(t, "SLUICE_REQUIRE_MYSQL", bin+" not found: skipping the tests that start their own MariaDB", err)
		}
	}
	s := &server{port: storetest.FreePort(t), dir: t.TempDir()}
	data := filepath.Join(s.dir, "data")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := os.Mkdir(filepath.Join(data, "test"), 0o700); err != nil {
		t.Fatal(err) // a database is a directory
	}
	s.Process = storetest.StartProcess(t, exec.Command("mariadbd", "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--port="+strconv.Itoa(s.port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(s.dir, "sock"),
		"--pid-file="+filepath.Join(s.dir, "pid"), "--skip-grant-tables", "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M", "--log-error="+filepath.Join(s.dir, "log")))
	db := openDB(t, s.dsn())
	// A loaded machine can take a minute or more to start InnoDB: the bound is for
	// a server that never comes up.
	storetest.WaitReady(t, "mariadbd on port "+strconv.Itoa(s.port), 2*time.Minute, db.PingContext)
	return s
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
