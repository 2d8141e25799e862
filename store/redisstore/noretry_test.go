package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// replyDropper is a TCP proxy to a Redis server that can lose one reply:
// armed, it reads the server's next reply and closes the connection
// instead of forwarding it, the way a network fault loses a reply after
// the server ran the command.
type replyDropper struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newReplyDropper(t *testing.T, target string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *replyDropper) addr() string { return p.ln.Addr().String() }

func (p *replyDropper) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *replyDropper) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		p.wg.Go(func() { _, _ = io.Copy(server, client); server.Close() })
		p.wg.Go(func() {
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 {
					if p.armed.CompareAndSwap(true, false) {
						server.Close()
						return // the reply is lost
					}
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

func (p *replyDropper) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestLostReplyChargesOnce: a decision whose reply is lost after Redis ran
// the script fails with ErrUnavailable and is charged exactly once, even
// with a client configured to retry (MaxRetries 3): go-redis would
// otherwise send the script again on a fresh connection.
func TestLostReplyChargesOnce(t *testing.T) {
	srv := startServer(t)
	p := newReplyDropper(t, srv.addr())
	c := redis.NewClient(&redis.Options{Addr: p.addr(), ContextTimeoutEnabled: true, MaxRetries: 3, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, redisstore.WithPrefix("lost"), redisstore.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "x", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour})
	decide := func(cost int64) (*store.Result, error) {
		var req store.Request
		req.Add(id, "k", cost)
		var res store.Result
		return &res, s.Decide(context.Background(), &req, &res)
	}
	if _, err := decide(0); err != nil { // warm: the connection and the script
		t.Fatal(err)
	}
	p.armed.Store(true)
	if _, err := decide(1); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Decide with its reply lost: %v, want ErrUnavailable", err)
	}
	res, err := decide(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Decision().Remaining; got != 4 {
		t.Fatalf("after one decision whose reply was lost: Remaining %d, want 4 (charged exactly once)", got)
	}
}
