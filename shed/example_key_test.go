package shed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// A quota per tenant and model together: each pair counts apart, without
// the model stuffed into the tenant id.
func ExampleKey() {
	sluice, err := shed.New([]shed.Rule{{Name: "tenant-model", Identity: shed.Composite,
		Key: shed.Key{"tenant", "attr:model"}, Algorithm: shed.FixedWindow, Limit: 2, Window: time.Hour}})
	if err != nil {
		panic(err)
	}
	ask := func(tenant, model string) {
		d, tok, err := sluice.Decide(context.Background(), shed.Attempt{Tenant: tenant,
			Attributes: []shed.Attribute{{Name: "model", Value: model}}})
		if err != nil {
			panic(err)
		}
		tok.Done(shed.Success)
		fmt.Println(tenant, model, d.Allowed)
	}
	ask("acme", "large")
	ask("acme", "large")
	ask("acme", "large")
	ask("acme", "small")
	// Output:
	// acme large true
	// acme large true
	// acme large false
	// acme small true
}
