package penalty_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/penalty"
)

func ExampleBox() {
	// Defaults: 3 strikes within an hour -> 5 min, then 15 min, then 1 h.
	box, err := penalty.NewBox(10_000)
	if err != nil {
		panic(err)
	}
	now := int64(time.Hour) // monotonic nanoseconds, normally clock.Now()
	for i := range 3 {
		st := box.Strike("rl:login:ip:203.0.113.9/32", now+int64(i)*int64(time.Minute))
		fmt.Printf("strike %d: timeout %v, level %d\n", i+1, st.RetryAfter, st.Level)
	}
	later := now + int64(4*time.Minute)
	wait, blocked := box.Check("rl:login:ip:203.0.113.9/32", later)
	fmt.Println("blocked:", blocked, "Retry-After:", wait)
	box.Pardon("rl:login:ip:203.0.113.9/32")
	_, blocked = box.Check("rl:login:ip:203.0.113.9/32", later)
	fmt.Println("after pardon:", blocked)

	// Suspicion lowers limits before a timeout: above 0.3, down to a
	// quarter of the limit at suspicion 1.
	scale, err := penalty.NewSuspicionScale(0.3, 0.25)
	if err != nil {
		panic(err)
	}
	m, _ := scale.Multiplier(0.65)
	fmt.Printf("limit x %.3f\n", m)
	// Output:
	// strike 1: timeout 0s, level 0
	// strike 2: timeout 0s, level 0
	// strike 3: timeout 5m0s, level 1
	// blocked: true Retry-After: 3m0s
	// after pardon: false
	// limit x 0.625
}
