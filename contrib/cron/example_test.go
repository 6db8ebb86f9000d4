package cron_test

import (
	"fmt"
	"time"

	"github.com/delaystream/delaystream/contrib/cron"
)

// A digest every Monday at 09:00 Berlin time: its next occurrences, in
// UTC (09:00 CET is 08:00 UTC).
func ExampleNew() {
	spec, err := cron.New("0 9 * * MON", "Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec)
	t := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for range 2 {
		t = spec.Next(t)
		fmt.Println(t.UTC().Format(time.RFC3339))
	}
	// Output:
	// CRON_TZ=Europe/Berlin 0 9 * * MON
	// 2026-11-30T08:00:00Z
	// 2026-12-07T08:00:00Z
}
