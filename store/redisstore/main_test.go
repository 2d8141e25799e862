package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails a run that passed but left goroutines behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// redialGrace is how long findLeaks waits for goroutines to end: a
// go-redis pool whose dials failed runs a redial loop that notices the
// pool's close only between its one-second sleeps.
const redialGrace = 3 * time.Second

// findLeaks is goleak.Find tried again until it finds nothing or
// redialGrace has passed.
func findLeaks(opts ...goleak.Option) error {
	deadline := time.Now().Add(redialGrace)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A closed client whose dials failed leaves no goroutine behind for the
// leak check, however late in the run it closed: go-redis's redial loop
// notices the close only between its one-second sleeps.
func TestLeakCheckWaitsOutAClosedPoolsRedialLoop(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 1, DialerRetries: 1, MaxRetries: -1})
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("a ping to port 1 was answered")
	}
	_ = c.Close() // the failed dial started the pool's redial loop; it is asleep
	if err := findLeaks(before); err != nil {
		t.Fatal(err)
	}
}
