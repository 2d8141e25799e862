package shed

import "log/slog"

// logFailOpen reports that rule failed open because the store failed.
func (c *Controller) logFailOpen(now int64, rule string, err error) {
	if ok, n := c.logs.failOpen.Allow(now); ok {
		c.log.Warn("shed: store failed, rule fails open", slog.String("rule", rule),
			slog.String("error", err.Error()), slog.Int64("suppressed", n))
	}
}

// logDryRun reports that a dry-run rule would have rejected a request.
func (c *Controller) logDryRun(now int64, rule string, k Kind) {
	if ok, n := c.logs.dryRun.Allow(now); ok {
		c.log.Info("shed: dry run, would reject", slog.String("rule", rule),
			slog.String("kind", k.String()), slog.Int64("suppressed", n))
	}
}

// logOverflow reports that rule shed a key because its store table is
// full of live keys (a key flood, or a capacity too small).
func (c *Controller) logOverflow(now int64, rule string) {
	if ok, n := c.logs.overflow.Allow(now); ok {
		c.log.Warn("shed: key table full, new keys shed", slog.String("rule", rule), slog.Int64("suppressed", n))
	}
}

// unknownPeer counts a request whose peer address the resolver could not
// parse, and logs it once per second with the address (at most 64 bytes of
// it: it came off the connection, not from the client's headers).
func (c *Controller) unknownPeer(a *ticket, remoteAddr string) {
	a.ctr[cUnknownPeer].Add(1)
	if ok, n := c.logs.peer.Allow(a.ask.Now); ok {
		c.log.Warn("shed: peer address not understood, per-IP rules count it as ip:unknown",
			slog.String("remote_addr", remoteAddr[:min(len(remoteAddr), 64)]), slog.Int64("suppressed", n))
	}
}

// proxyPeer counts a request from a trusted proxy that sent none of the
// resolver's configured headers (keyed on the proxy: every client behind
// it shares one key), and logs it once per second.
func (c *Controller) proxyPeer(a *ticket) {
	a.ctr[cProxyPeer].Add(1)
	if ok, n := c.logs.proxy.Allow(a.ask.Now); ok {
		c.log.Warn("shed: a trusted proxy sent no client address header; the request is keyed on the proxy",
			slog.String("ip", a.ask.IP.String()), slog.Int64("suppressed", n))
	}
}

// cgnat counts a per-IP rule's CGNAT choice for a (raised, or skipped for
// a stronger identity) and logs it for audit, once per second.
func (c *Controller) cgnat(a *ticket, r *rule, what string) {
	a.ctr[cCGNAT].Add(1)
	if ok, n := c.logs.cgnat.Allow(a.now); ok {
		c.log.Info("shed: carrier-grade NAT client: per-IP "+what, slog.String("rule", r.Name),
			slog.String("ip", a.ask.IP.String()), slog.Int64("suppressed", n))
	}
}
