package shed

import (
	"strings"
	"testing"
	"time"
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
	ps := []Policy{
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
	bad := []Policy{
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
