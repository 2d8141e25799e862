package shed

import (
	"math"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestCeilSecondsNeverEarly(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int64
	}{
		{0, 0}, {-time.Second, 0}, {1, 1}, {time.Second, 1}, {time.Second + 1, 2},
		{1500 * time.Millisecond, 2}, {59 * time.Second, 59}, {time.Hour, 3600},
	}
	for _, c := range cases {
		if got := ceilSeconds(c.d); got != c.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
		if c.d > 0 && time.Duration(ceilSeconds(c.d))*time.Second < c.d {
			t.Errorf("ceilSeconds(%v) rounds down", c.d)
		}
	}
}

func TestPolicyField(t *testing.T) {
	ps := []quotaPolicy{
		{Name: "burst", Quota: 100, Window: time.Minute},
		{Name: "daily", Quota: 1000, Window: 24 * time.Hour},
		{Name: `we"ird\`, Quota: 5, Window: 1500 * time.Millisecond, Unit: "concurrent-requests"},
	}
	for _, p := range ps {
		if err := p.validate(); err != nil {
			t.Fatal(err)
		}
	}
	got := policyField(ps)
	want := `"burst";q=100;w=60, "daily";q=1000;w=86400, "we\"ird\\";q=5;qu="concurrent-requests";w=2`
	if got != want {
		t.Fatalf("policy field\n got %s\nwant %s", got, want)
	}
	item := string(appendRateLimitItem(nil, "burst", 50, 29*time.Second+time.Millisecond))
	if item != `"burst";r=50;t=30` {
		t.Fatalf("RateLimit item %s", item)
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := []quotaPolicy{
		{Name: "", Quota: 1, Window: time.Second},
		{Name: "a\nb", Quota: 1, Window: time.Second},
		{Name: "é", Quota: 1, Window: time.Second},
		{Name: "a", Quota: 0, Window: time.Second},
		{Name: "a", Quota: 1e16, Window: time.Second},
		{Name: "a", Quota: 1, Window: 0},
		{Name: "a", Quota: 1, Window: time.Second, Unit: "bytes"},
	}
	for _, p := range bad {
		if err := p.validate(); err == nil || !strings.HasPrefix(err.Error(), "shed: ") {
			t.Errorf("%+v: got %v, want a shed: error", p, err)
		}
	}
}

// TestAppendDecimal checks the hot path's integer and IP key formatting
// against strconv and netip, on the edges and on random values.
func TestAppendDecimal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.OneOf(rapid.Int64Range(0, 1000), rapid.Int64Min(0)).Draw(t, "v")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 70).Draw(t, "prefix")
		got := string(appendDecimal(append([]byte(nil), prefix...), v))
		if want := string(prefix) + strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
		ip := netip.AddrFrom4([4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "ip")))
		if got, want := string(appendIPKey(nil, ip)), "ip:"+ip.String(); got != want {
			t.Fatalf("appendIPKey(%v) = %q, want %q", ip, got, want)
		}
	})
	for _, v := range []int64{0, 9, 10, 99, 100, 999_999_999_999_999_999, math.MaxInt64} {
		if got, want := string(appendDecimal(nil, v)), strconv.FormatInt(v, 10); got != want {
			t.Errorf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
	}
	for _, s := range []string{"2001:db8::1", "::ffff:1.2.3.4", "fe80::1%eth0", "0.0.0.0", "255.255.255.255"} {
		ip := netip.MustParseAddr(s)
		if got, want := string(appendIPKey(nil, ip)), "ip:"+ip.String(); got != want {
			t.Errorf("appendIPKey(%v) = %q, want %q", ip, got, want)
		}
	}
}
