package penalty

import (
	"testing"
	"time"
)

// TestBoxFlood: floodKeys distinct keys (10 million into 2^16 entries
// without the race detector) strike once each; memory stays at the
// capacity and every early offender still serves its timeout.
func TestBoxFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("flood skipped in -short")
	}
	const capacity = floodCapacity
	b := mustBox(t, capacity, WithStrikes(1, time.Hour))
	offenders := make([]string, 100)
	for i := range offenders {
		offenders[i] = "offender-" + keyOf(i)
		b.Strike(offenders[i], 1)
	}
	key := make([]byte, 0, 32)
	for i := range floodKeys {
		key = append(key[:0], "flood-"...)
		key = appendInt(key, i)
		b.Strike(string(key), 2+int64(i))
	}
	s := b.Stats()
	if s.Entries > capacity || s.Capacity != capacity {
		t.Fatalf("stats %+v", s)
	}
	if s.Overflows == 0 {
		t.Fatalf("no overflow after %d keys: %+v", floodKeys, s)
	}
	for _, k := range offenders {
		if _, blocked := b.Check(k, 2+floodKeys); !blocked {
			t.Fatalf("%s forgotten under the flood", k)
		}
	}
}

func appendInt(b []byte, i int) []byte {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return append(b, buf[n:]...)
}
