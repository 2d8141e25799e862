package redisstore_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// clusterPort returns a free port whose cluster bus port (+10000) is free
// too.
func clusterPort(t *testing.T) int {
	t.Helper()
	for range 50 {
		p := storetest.FreePort(t)
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
	cc, _ := startClusterOf(t, 0)
	return cc
}

// startClusterOf starts a Redis Cluster of 3 masters with replicas
// replicas each, and returns a client of it (with go-redis's defaults but
// for context deadlines and retries) and its servers by address.
func startClusterOf(t *testing.T, replicas int) (*redis.ClusterClient, map[string]*server) {
	t.Helper()
	_, cli := redisBinaries(t)
	var addrs []string
	servers := map[string]*server{}
	for range 3 * (1 + replicas) {
		s := &server{t: t, port: clusterPort(t), dir: t.TempDir()}
		s.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", s.dir + "/nodes.conf",
			"--cluster-node-timeout", "2000"}
		s.start()
		t.Cleanup(s.stop)
		addrs = append(addrs, s.addr())
		servers[s.addr()] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
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
	// A replica takes over only once it has synced with its master.
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for replicas > 0 {
			info, err := c.Info(ctx, "replication").Result()
			if err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")) {
				break
			}
			if ctx.Err() != nil {
				c.Close()
				t.Fatalf("cluster node %s not synced: %v %q", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	return cc, servers
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

// TestStoreReloadsClusterSlotsAfterAFailure: a failed call makes a Cluster
// client reload its slot map at once (here from ClusterSlots, which points
// every slot at a dead node), instead of at its next reload interval.
func TestStoreReloadsClusterSlotsAfterAFailure(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(storetest.FreePort(t))
	var loads atomic.Int64
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			loads.Add(1)
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: dead}}}}, nil
		},
	})
	t.Cleanup(func() { _ = cc.Close() })
	s, err := redisstore.New(cc, redisstore.WithPrefix("reload"))
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "x", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute})
	var req store.Request
	req.Add(id, "k", 1)
	var res store.Result
	if err := s.Decide(context.Background(), &req, &res); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Decide on a dead node: %v, want ErrUnavailable", err)
	}
	// The first call loaded the map; the failure asks for another load.
	waitFor(t, 2*time.Second, "the slot map is reloaded after the failure", func() bool { return loads.Load() >= 2 })
}

// TestClusterFailoverRecovery: when the master holding a Fallback's slot
// dies and its replica takes over, the Fallback decides on Redis again
// within 10 s of the failover with the default probe and recovery
// settings and go-redis's default ClusterOptions.
func TestClusterFailoverRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster failover takes seconds")
	}
	cc, servers := startClusterOf(t, 1)
	prefix := testPrefix(t, cc)
	ctx := context.Background()
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	f, err := redisstore.NewFallback(s, fallback.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	id := storetest.MustRegister(t, f, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: 1 << 20, Window: time.Hour})
	decide := func() {
		var req store.Request
		req.Now = clock.Now()
		req.Add(id, "k", 1)
		var res store.Result
		if err := f.Decide(ctx, &req, &res); err != nil {
			t.Fatal(err)
		}
	}
	master, err := cc.MasterForKey(ctx, "{"+prefix+"}")
	if err != nil {
		t.Fatal(err)
	}
	addr := master.Options().Addr
	servers[addr].kill()
	// Trip the breaker, then wait (bounded) for a replica to take over,
	// asked of a surviving node through a client of its own.
	for !f.Stats().Degraded {
		decide()
	}
	var other string
	for a := range servers {
		if a != addr {
			other = a
			break
		}
	}
	watch := redis.NewClient(&redis.Options{Addr: other})
	defer watch.Close()
	defer func() {
		if t.Failed() {
			nodes, err := watch.ClusterNodes(ctx).Result()
			t.Logf("cluster nodes (%v):\n%s", err, nodes)
		}
	}()
	waitFor(t, 30*time.Second, "a replica takes over the slot", func() bool {
		slots, err := watch.ClusterSlots(ctx).Result()
		if err != nil {
			return false
		}
		slot := int(crc16([]byte(prefix)) % 16384)
		for _, r := range slots {
			if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr != addr
			}
		}
		return false
	})
	took := waitFor(t, 20*time.Second, "the Fallback decides on Redis again", func() bool { return !f.Stats().Degraded })
	t.Logf("recovered %v after the failover", took)
	if took > 10*time.Second {
		t.Errorf("recovery took %v after the failover, want under 10s", took)
	}
	before := f.Stats().FallbackDecisions
	decide()
	if f.Stats().FallbackDecisions != before {
		t.Error("decided locally after the recovery")
	}
}

// crc16 is Redis Cluster's key hash (CRC16-CCITT, XModem).
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// tagged is a Store whose callers' keys all carry one hash tag: the
// conformance harness's keys, rewritten, and given back in leases as the
// harness wrote them.
type tagged struct {
	*redisstore.Store
	tag string // "{...}"
}

func (s tagged) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	r := *req
	for i := range r.Hits[:min(max(r.N, 0), store.MaxHits)] {
		r.Hits[i].Key = s.tag + r.Hits[i].Key
	}
	err := s.Store.Decide(ctx, &r, res)
	for i := range res.Hits[:min(max(res.N, 0), store.MaxHits)] {
		if l := &res.Hits[i].Lease; l.Held() {
			l.Key = strings.TrimPrefix(l.Key, s.tag)
		}
	}
	return err
}

func (s tagged) Release(ctx context.Context, l store.Lease, now int64) error {
	l.Key = s.tag + l.Key
	return s.Store.Release(ctx, l, now)
}

func (s tagged) Reset(ctx context.Context, id store.LimitID, key string) error {
	return s.Store.Reset(ctx, id, s.tag+key)
}

func (s tagged) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	r := *req
	for i := range r.Hits[:min(max(r.N, 0), store.MaxHits)] {
		r.Hits[i].Key = s.tag + r.Hits[i].Key
	}
	return s.Store.Refund(ctx, &r, res)
}

// TestClusterKeyTags runs the conformance harness on a 3-master Redis
// Cluster with WithKeyTags, every key of a subtest under a hash tag of its
// own, under one prefix: the subtests' states spread over the masters,
// and each decision still finds all its keys in one slot.
func TestClusterKeyTags(t *testing.T) {
	cc := startCluster(t)
	prefix := testPrefix(t, cc)
	masters := map[string]bool{}
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		tag := "{tenant" + strconv.Itoa(n) + "}"
		m, err := cc.MasterForKey(context.Background(), "{"+prefix+":tenant"+strconv.Itoa(n)+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		s, err := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithKeyTags(), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return tagged{Store: s, tag: tag}
	}, storetest.WithServerTime(conformanceWait))
	if len(masters) < 2 {
		t.Errorf("the subtests' tags used %d master(s); want them spread over several", len(masters))
	}
}

// TestKeyTagsRejectMixedRequests: with WithKeyTags, a request whose keys
// carry different tags (or some a tag and some none) is bad input, an
// error that is not store.ErrUnavailable, on a Store and on a Fallback
// alike (the Fallback's Redis is down: it would decide locally).
func TestKeyTagsRejectMixedRequests(t *testing.T) {
	c := newClient(t, "127.0.0.1:"+strconv.Itoa(storetest.FreePort(t)))
	s, err := redisstore.New(c, redisstore.WithPrefix("mixed"), redisstore.WithKeyTags())
	if err != nil {
		t.Fatal(err)
	}
	f, err := redisstore.NewFallback(s, fallback.WithLogger(quiet), fallback.WithTripAfter(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	a := storetest.MustRegister(t, f, store.Spec{Name: "a", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute})
	b := storetest.MustRegister(t, f, store.Spec{Name: "b", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute})
	for name, keys := range map[string][2]string{
		"two tags":       {"{acme}:alice", "{bolt}:bob"},
		"tag and none":   {"{acme}:alice", "1.2.3.4"},
		"none and a tag": {"1.2.3.4", "{acme}"},
	} {
		var req store.Request
		req.Now = clock.Now()
		req.Add(a, keys[0], 1)
		req.Add(b, keys[1], 1)
		var res store.Result
		for _, st := range []store.Store{s, f} {
			if err := st.Decide(context.Background(), &req, &res); err == nil || errors.Is(err, store.ErrUnavailable) ||
				!strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Errorf("%s on %T: %v, want a redisstore error for bad input", name, st, err)
			}
		}
	}
	// One tag, or none at all, is a request like any other.
	for _, keys := range [][2]string{{"{acme}", "{acme}:alice"}, {"1.2.3.4", "alice"}} {
		var req store.Request
		req.Now = clock.Now()
		req.Add(a, keys[0], 1)
		req.Add(b, keys[1], 1)
		var res store.Result
		if err := f.Decide(context.Background(), &req, &res); err != nil || !res.Allowed {
			t.Errorf("%q: %v %+v", keys, err, res)
		}
	}
}
