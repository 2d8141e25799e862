package fingerprint

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
)

// tlsSlotKey is the context key of a connection's fingerprint slot.
type tlsSlotKey struct{}

// tlsSlot receives a connection's fingerprint during its handshake. It is
// written by the handshake (GetConfigForClient) and read by handlers of the
// same connection; the atomic makes that safe whatever the server's
// goroutine structure.
type tlsSlot struct {
	fp atomic.Pointer[TLSFingerprint]
}

// ConnContext is an http.Server.ConnContext that gives every connection a
// slot for its TLS fingerprint; a config from CaptureTLS fills it during
// the handshake and TLSFromContext reads it in a handler. It returns ctx
// with the slot added and allocates one slot per connection. To combine it
// with a ConnContext of your own, call it from yours.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, tlsSlotKey{}, &tlsSlot{})
}

// CaptureTLS returns a clone of cfg whose GetConfigForClient computes the
// JA3 and JA4 fingerprints of each ClientHello (FingerprintHello) and
// stores them in the connection's slot (see ConnContext), then defers to
// cfg's own GetConfigForClient, if any. Connections whose context has no
// slot are served unchanged. It returns an error when cfg is nil.
//
// The fingerprint is computed once per handshake, which allocates its
// strings; requests on the connection then read it for free.
func CaptureTLS(cfg *tls.Config) (*tls.Config, error) {
	if cfg == nil {
		return nil, errors.New("fingerprint: CaptureTLS needs a tls.Config")
	}
	out := cfg.Clone()
	next := cfg.GetConfigForClient
	out.GetConfigForClient = func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		if slot, ok := chi.Context().Value(tlsSlotKey{}).(*tlsSlot); ok {
			fp := FingerprintHello(chi)
			slot.fp.Store(&fp)
		}
		if next != nil {
			return next(chi)
		}
		return nil, nil
	}
	return out, nil
}

// TLSFromContext returns the TLS fingerprint of the connection ctx belongs
// to (a request's context, under a server set up with ConnContext and
// CaptureTLS). It reports false for plain-text connections and servers not
// so set up. It allocates nothing.
func TLSFromContext(ctx context.Context) (TLSFingerprint, bool) {
	slot, ok := ctx.Value(tlsSlotKey{}).(*tlsSlot)
	if !ok {
		return TLSFingerprint{}, false
	}
	fp := slot.fp.Load()
	if fp == nil {
		return TLSFingerprint{}, false
	}
	return *fp, true
}
