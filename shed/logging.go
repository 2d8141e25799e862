package shed

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// logEvery is the least time between two log lines of one kind: a flood of
// rejections must not become a flood of log lines.
const logEvery = int64(time.Second)

// logGate lets one log line of its kind through per logEvery and counts
// the ones it holds back, which the next line reports. Safe for concurrent
// use; one load on the common path.
type logGate struct {
	last       atomic.Int64
	suppressed atomic.Int64
}

// allow reports whether a line may be logged at now, and how many were
// suppressed since the previous one.
func (g *logGate) allow(now int64) (bool, int64) {
	last := g.last.Load()
	if last != 0 && now-last < logEvery {
		g.suppressed.Add(1)
		return false, 0
	}
	if !g.last.CompareAndSwap(last, now) {
		g.suppressed.Add(1) // another goroutine logs this second
		return false, 0
	}
	return true, g.suppressed.Swap(0)
}

// logFailOpen reports that rule failed open because the store failed.
func (c *Controller) logFailOpen(now int64, rule string, err error) {
	if ok, n := c.logs.failOpen.allow(now); ok {
		c.log.Warn("shed: store failed, rule fails open", slog.String("rule", rule),
			slog.String("error", err.Error()), slog.Int64("suppressed", n))
	}
}

// logDryRun reports that a dry-run rule would have rejected a request.
func (c *Controller) logDryRun(now int64, rule string, k Kind) {
	if ok, n := c.logs.dryRun.allow(now); ok {
		c.log.Info("shed: dry run, would reject", slog.String("rule", rule),
			slog.String("kind", k.String()), slog.Int64("suppressed", n))
	}
}

// logOverflow reports that rule shed a key because its store table is
// full of live keys (a key flood, or a capacity too small).
func (c *Controller) logOverflow(now int64, rule string) {
	if ok, n := c.logs.overflow.allow(now); ok {
		c.log.Warn("shed: key table full, new keys shed", slog.String("rule", rule), slog.Int64("suppressed", n))
	}
}

// unknownPeer counts a request whose peer address the resolver could not
// parse, and logs it once per second with the address (at most 64 bytes of
// it: it came off the connection, not from the client's headers).
func (c *Controller) unknownPeer(a *ticket, remoteAddr string) {
	c.ctr.add(a.shard, cUnknownPeer, 1)
	if ok, n := c.logs.peer.allow(a.ask.Now); ok {
		c.log.Warn("shed: peer address not understood, per-IP rules count it as ip:unknown",
			slog.String("remote_addr", remoteAddr[:min(len(remoteAddr), 64)]), slog.Int64("suppressed", n))
	}
}

// proxyPeer counts a request from a trusted proxy that sent none of the
// resolver's configured headers (keyed on the proxy: every client behind
// it shares one key), and logs it once per second.
func (c *Controller) proxyPeer(a *ticket) {
	c.ctr.add(a.shard, cProxyPeer, 1)
	if ok, n := c.logs.proxy.allow(a.ask.Now); ok {
		c.log.Warn("shed: a trusted proxy sent no client address header; the request is keyed on the proxy",
			slog.String("ip", a.ask.IP.String()), slog.Int64("suppressed", n))
	}
}

// cgnat counts a per-IP rule's CGNAT choice for a (raised, or skipped for
// a stronger identity) and logs it for audit, once per second.
func (c *Controller) cgnat(a *ticket, r *rule, what string) {
	c.ctr.add(a.shard, cCGNAT, 1)
	if ok, n := c.logs.cgnat.allow(a.now); ok {
		c.log.Info("shed: carrier-grade NAT client: per-IP "+what, slog.String("rule", r.Name),
			slog.String("ip", a.ask.IP.String()), slog.Int64("suppressed", n))
	}
}
