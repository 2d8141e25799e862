package fingerprint

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

func TestHasherMatchesHMACSHA256(t *testing.T) {
	secret := []byte("0123456789abcdef-the-key")
	h, err := NewHasher(WithSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"", "sk_live_abc", strings.Repeat("x", 1000)} {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(in))
		want := base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:SumBytes])
		if got := h.Sum(in); got != want || len(got) != SumLen {
			t.Errorf("Sum(%.10q) = %q, want %q", in, got, want)
		}
		if got := string(h.AppendSum([]byte("p:"), []byte(in))); got != "p:"+want {
			t.Errorf("AppendSum = %q", got)
		}
		if strings.Contains(h.Sum(in), in) && in != "" {
			t.Error("sum contains the secret")
		}
	}
}

func TestHasherKeyed(t *testing.T) {
	a, _ := NewHasher()
	b, _ := NewHasher()
	if a.Sum("k") == b.Sum("k") {
		t.Fatal("two random-keyed hashers agree: secret not random")
	}
	if a.Sum("k") != a.Sum("k") || a.Sum("k") == a.Sum("l") {
		t.Fatal("sum not a function of the input")
	}
	if _, err := NewHasher(WithSecret(make([]byte, MinSecretBytes-1))); err == nil || !strings.HasPrefix(err.Error(), "fingerprint: ") {
		t.Fatalf("short secret: %v", err)
	}
}

func TestHasherAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	h, _ := NewHasher()
	buf := make([]byte, 0, 64)
	secret := strings.Repeat("api-key-", 20)
	h.AppendSumString(buf, secret) // warm the pool
	if n := testing.AllocsPerRun(100, func() { buf = h.AppendSumString(buf[:0], secret) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
