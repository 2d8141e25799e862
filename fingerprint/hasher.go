package fingerprint

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// Hasher sizes.
const (
	// MinSecretBytes is the shortest secret WithSecret accepts.
	MinSecretBytes = 16
	// SumBytes is how much of the HMAC-SHA256 a Hasher keeps: 128 bits,
	// beyond any collision an attacker could search for in a key space.
	SumBytes = 16
	// SumLen is the length of an encoded sum: SumBytes in unpadded
	// base64url.
	SumLen = 22
)

// Hasher turns secrets (API keys, tokens, session ids) into keyed hashes
// before they reach a store key, a log line or a metric: HMAC-SHA256 under a
// secret key, truncated to SumBytes and encoded as unpadded base64url
// (SumLen characters, safe in keys and URLs). Without the key, a sum neither
// reveals the secret nor can be computed from a guess.
//
// A Hasher is safe for concurrent use. Its zero value is not usable; call
// NewHasher.
type Hasher struct {
	pool sync.Pool // of *macState
}

// macState is one reusable HMAC plus scratch space for string input.
type macState struct {
	mac     hash.Hash
	scratch [64]byte
	sum     [sha256.Size]byte
}

// HasherOption configures NewHasher.
type HasherOption interface {
	apply(*hasherConfig) error
}

type hasherConfig struct{ secret []byte }

type hasherOptionFunc func(*hasherConfig) error

func (f hasherOptionFunc) apply(c *hasherConfig) error { return f(c) }

// WithSecret sets the HMAC key. Use it to get the same sums across processes
// (a shared store); the secret must be at least MinSecretBytes long. Without
// it each Hasher draws a random 32-byte key, so its sums are meaningful only
// inside the process.
func WithSecret(secret []byte) HasherOption {
	return hasherOptionFunc(func(c *hasherConfig) error {
		if len(secret) < MinSecretBytes {
			return fmt.Errorf("fingerprint: secret must be at least %d bytes, got %d", MinSecretBytes, len(secret))
		}
		c.secret = append([]byte(nil), secret...)
		return nil
	})
}

// NewHasher returns a Hasher. It returns an error for a short secret or when
// the system's random source fails.
func NewHasher(opts ...HasherOption) (*Hasher, error) {
	var c hasherConfig
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("fingerprint: nil HasherOption")
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	if c.secret == nil {
		c.secret = make([]byte, 32)
		if _, err := rand.Read(c.secret); err != nil {
			return nil, fmt.Errorf("fingerprint: random secret: %w", err)
		}
	}
	key := c.secret
	h := &Hasher{}
	h.pool.New = func() any { return &macState{mac: hmac.New(sha256.New, key)} }
	return h, nil
}

// AppendSum appends the encoded keyed hash of secret (SumLen bytes) to dst
// and returns the extended buffer. It allocates only when dst lacks room.
func (h *Hasher) AppendSum(dst, secret []byte) []byte {
	st := h.pool.Get().(*macState)
	st.mac.Reset()
	st.mac.Write(secret)
	dst = st.finish(dst)
	h.pool.Put(st)
	return dst
}

// AppendSumString is AppendSum for a string secret; it copies the string
// through a fixed scratch buffer instead of converting it.
func (h *Hasher) AppendSumString(dst []byte, secret string) []byte {
	st := h.pool.Get().(*macState)
	st.mac.Reset()
	for secret != "" {
		n := copy(st.scratch[:], secret)
		st.mac.Write(st.scratch[:n])
		secret = secret[n:]
	}
	dst = st.finish(dst)
	h.pool.Put(st)
	return dst
}

// Sum returns the encoded keyed hash of secret. It allocates the result.
func (h *Hasher) Sum(secret string) string {
	var buf [SumLen]byte
	return string(h.AppendSumString(buf[:0], secret))
}

func (st *macState) finish(dst []byte) []byte {
	sum := st.mac.Sum(st.sum[:0])
	return base64.RawURLEncoding.AppendEncode(dst, sum[:SumBytes])
}
