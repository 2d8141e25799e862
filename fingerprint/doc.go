// Package fingerprint answers "who is asking" for sluice: the client IP
// behind trusted proxies (never a header the client wrote), address
// normalisation and grouping (IPv4-mapped folding, zones, IPv6 prefixes,
// CGNAT detection), keyed hashing of secrets and the rate-limit key layouts
// built from them, route keys and method classes, TLS client fingerprints
// (JA3, JA4) and behavioural signals combined into a suspicion score.
//
// The request-path functions (Resolver.ClientIP, AppendNormalizedPath,
// Category's Append methods, Hasher.AppendSum) write into caller buffers and
// allocate nothing in the common case; each doc comment says where that is
// not so. Everything here is safe for concurrent use unless a doc comment
// says otherwise, and nothing holds package-level mutable state.
package fingerprint
