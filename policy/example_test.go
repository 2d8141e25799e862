package policy_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

// A login policy: 2 attempts per account per 15 minutes (the field uses
// 5), checked before the request reaches the handler.
func Example() {
	p, err := policy.Parse("login.json", []byte(`{
  "version": 1,
  "categories": [{"name": "auth", "routes": ["POST /login"]}],
  "rules": [
    {"name": "login-account", "category": "auth", "identity": "user",
     "algorithm": "sliding_log", "limit": 2, "window": "15m", "failure": "fail_closed"}
  ]
}`))
	if err != nil {
		panic(err)
	}
	c, err := p.New()
	if err != nil {
		panic(err)
	}
	defer c.Close()
	cat := p.Category("POST", "/login")
	for range 3 {
		d, tok, _ := c.Decide(context.Background(), shed.Attempt{Category: cat, User: "alice"})
		fmt.Println(cat, d.Allowed, d.Rule)
		tok.Done(shed.Success)
	}
	_, err = policy.Parse("bad.json", []byte("{\"version\": 1,\n \"rules\": [{\"name\": \"x\", \"identity\": \"ip\",\n  \"algorithm\": \"sliding_log\", \"limit\": 0, \"window\": \"1m\"}]}"))
	fmt.Println(err)
	// Output:
	// auth true login-account
	// auth true login-account
	// auth false login-account
	// policy: bad.json:3: rules[0].limit: must be positive, got 0
}
