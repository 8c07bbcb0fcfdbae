// SPDX-License-Identifier: Apache-2.0

package stage_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/stage"
)

// A stage guards work that is not an HTTP request: here at most one
// database query at a time, and one more may wait up to 20 ms.
func ExampleStage_Admit() {
	ctrl := control.DefaultStaticConcurrencyConfig()
	ctrl.Limit = 1 // at most 1 at once, 1 more waits up to 20 ms
	db, err := stage.New(stage.Options{Name: "db", Controller: &ctrl,
		MaxQueue: 1, QueueTimeout: 20 * time.Millisecond}, time.Now())
	if err != nil {
		panic(err) // a *sluice.FieldError
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go db.Run(ctx) // the control loop

	query := func(ctx context.Context) (err error) {
		done, err := db.Admit(ctx, 0) // class 0 is the highest priority
		if err != nil {
			return err // wraps sluice.ErrRejected, or is ctx's error
		}
		// Success, Failure, or Ignore for a call that says nothing about
		// the database; once: extra calls do nothing.
		defer func() { done(sluice.OutcomeOf(err == nil)) }()
		return nil // … the query …
	}
	fmt.Println(query(ctx))

	done, _ := db.Admit(ctx, 0) // hold the only slot
	err = query(ctx)
	done(sluice.Success)
	fmt.Println(errors.Is(err, stage.ErrQueueTimeout), errors.Is(err, sluice.ErrRejected))
	// Output:
	// <nil>
	// true true
}

// Enter is Admit without the closure: the Ticket ends the request, and
// says whether it failed; Finish also takes the time of the end and time
// to leave out of the response time.
func ExampleStage_Enter() {
	st, err := stage.New(stage.Options{Name: "calls"}, time.Now()) // auto at its defaults
	if err != nil {
		panic(err)
	}
	t, err := st.Enter(context.Background(), 0)
	if err != nil {
		panic(err)
	}
	t.Done(sluice.Failure) // an error, a timeout, a caller that left

	t, err = st.Enter(context.Background(), 0)
	if err != nil {
		panic(err)
	}
	slow := 5 * time.Millisecond // spent writing to a slow client, say
	t.Finish(time.Now(), stage.Outcome{OK: true, Excluded: slow})

	fmt.Println(st.Controller().Current().Kind)
	// Output: concurrency
}

// A response that turns into a long-lived stream (a WebSocket, an event
// stream) gives its slot back at once through a Lifecycle, and is counted
// but never a response-time sample.
func ExampleLifecycle() {
	st, err := stage.New(stage.Options{Name: "events"}, time.Now())
	if err != nil {
		panic(err)
	}
	t, err := st.Enter(context.Background(), 0)
	if err != nil {
		panic(err)
	}
	var lc stage.Lifecycle
	lc.Reset(t)
	fmt.Println(lc.Stream(time.Now())) // the slot is free from here on
	fmt.Println(lc.Done(time.Now(), stage.Outcome{OK: true}), lc.Done(time.Now(), stage.Outcome{OK: true}))
	// Output:
	// true
	// true false
}
