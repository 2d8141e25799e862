package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A Faulty store fails on demand, for testing a caller's fail-open and
// fail-closed paths.
func ExampleFaulty() {
	ctx := context.Background()
	s := storetest.NewFaulty(store.NewMemory())
	id, _ := s.Register(ctx, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: 10, Window: time.Minute})

	req := store.Request{Now: int64(time.Hour)}
	req.Add(id, "tenant:42", 1)
	var res store.Result

	s.SetErr(store.Unavailable(io.ErrUnexpectedEOF)) // the server went away
	err := s.Decide(ctx, &req, &res)
	fmt.Println(err, errors.Is(err, store.ErrUnavailable))

	s.SetErr(nil)
	err = s.Decide(ctx, &req, &res)
	fmt.Println(err, res.Allowed, res.Decision().Remaining)
	// Output:
	// store: unavailable: unexpected EOF true
	// <nil> true 9
}
