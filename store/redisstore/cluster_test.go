package redisstore_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// clusterPort returns a free port whose cluster bus port (+10000) is free
// too.
func clusterPort(t *testing.T) int {
	t.Helper()
	for range 50 {
		p := freePort(t)
		if p+10000 > 65535 {
			continue
		}
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

// startCluster starts a 3-master Redis Cluster of private servers and
// returns a client of it; everything is torn down when the test ends.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	_, cli := redisBinaries(t)
	var addrs []string
	for range 3 {
		s := &server{t: t, port: clusterPort(t), dir: t.TempDir()}
		s.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", s.dir + "/nodes.conf",
			"--cluster-node-timeout", "2000"}
		s.start()
		t.Cleanup(s.stop)
		addrs = append(addrs, s.addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Wait (bounded) until every node reports the cluster ok.
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				c.Close()
				t.Fatalf("cluster node %s not ok: %v %q", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestCluster runs the conformance harness on a 3-master Redis Cluster:
// every key of a store shares its prefix's hash tag, so no request meets
// CROSSSLOT. Stores of different prefixes land on different masters.
func TestCluster(t *testing.T) {
	cc := startCluster(t)
	masters := map[string]bool{}
	storetest.Run(t, func(t *testing.T) store.Store {
		prefix := testPrefix(t, cc)
		m, err := cc.MasterForKey(context.Background(), "{"+prefix+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		s, err := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.WithServerTime(conformanceWait))
	if len(masters) < 2 {
		t.Errorf("the subtests' stores used %d master(s); want prefixes spread over several", len(masters))
	}
}
