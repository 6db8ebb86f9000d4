// Package margin checks the bounded assertions of tests (a duration or a
// count against a limit) and records how near each came to failing.
//
// Each check asserts as testify does (and fails the test the same way);
// when the environment variable DELAYSTREAM_MARGINS names a file, it also
// appends one line to it:
//
//	<margin>\t<test>/<name>\t<observed> <op> <bound>
//
// where margin is (bound-observed)/|bound| for an upper bound and
// (observed-bound)/|bound| for a lower bound: 1 is far from the bound, 0
// on it, below 0 failed. make stress sets the variable and prints the
// closest margins, so that a bound that passes narrowly is seen before it
// fails.
package margin

import (
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Env names the file the checks append their margins to; unset, nothing
// is recorded.
const Env = "DELAYSTREAM_MARGINS"

// Number is what the checks compare: counts and durations.
type Number interface {
	~int | ~int64 | ~uint64 | ~float64
}

// LessOrEqual asserts observed <= bound (as assert.LessOrEqual) and
// records the margin under name.
func LessOrEqual[T Number](tb testing.TB, name string, observed, bound T, msgAndArgs ...any) bool {
	tb.Helper()
	Record(tb, name, "<=", observed, bound)
	return assert.LessOrEqual(tb, observed, bound, msgAndArgs...)
}

// Less asserts observed < bound (as assert.Less) and records the margin
// under name.
func Less[T Number](tb testing.TB, name string, observed, bound T, msgAndArgs ...any) bool {
	tb.Helper()
	Record(tb, name, "<", observed, bound)
	return assert.Less(tb, observed, bound, msgAndArgs...)
}

// GreaterOrEqual asserts observed >= bound (as assert.GreaterOrEqual) and
// records the margin under name.
func GreaterOrEqual[T Number](tb testing.TB, name string, observed, bound T, msgAndArgs ...any) bool {
	tb.Helper()
	Record(tb, name, ">=", observed, bound)
	return assert.GreaterOrEqual(tb, observed, bound, msgAndArgs...)
}

// Greater asserts observed > bound (as assert.Greater) and records the
// margin under name.
func Greater[T Number](tb testing.TB, name string, observed, bound T, msgAndArgs ...any) bool {
	tb.Helper()
	Record(tb, name, ">", observed, bound)
	return assert.Greater(tb, observed, bound, msgAndArgs...)
}

// Eventually waits until cond holds, checking every tick, and fails the
// test at once (as require.Eventually) when it does not within limit. It
// records how long the wait took against limit under name, and returns it.
func Eventually(tb testing.TB, name string, cond func() bool, limit, tick time.Duration, msgAndArgs ...any) time.Duration {
	tb.Helper()
	begin := time.Now()
	ok := assert.Eventually(tb, cond, limit, tick, msgAndArgs...)
	took := time.Since(begin)
	if !ok {
		took = max(took, limit+tick) // not met: recorded as failed
	}
	Record(tb, name, "<=", took, limit)
	if !ok {
		tb.FailNow() // assert.Eventually reported it
	}
	return took
}

// Progress waits until done reports true, checking every tick, for work
// whose pace load sets but which must never stop: it fails (reporting
// false) only when the count progress returns has not grown for stall, or
// once limit has passed, a bound on the whole wait that no healthy run
// nears. It records the longest time without progress against stall under
// name. done and progress are called from the waiting goroutine, one after
// the other.
func Progress(tb testing.TB, name string, done func() bool, progress func() int, stall, limit, tick time.Duration) bool {
	tb.Helper()
	begin := time.Now()
	last, lastAt, longest := progress(), begin, time.Duration(0)
	for {
		if done() {
			Record(tb, name, "<", longest, stall)
			return true
		}
		now := time.Now()
		if n := progress(); n != last {
			last, lastAt = n, now
		}
		longest = max(longest, now.Sub(lastAt))
		switch {
		case now.Sub(lastAt) >= stall:
			Record(tb, name, "<", longest, stall)
			tb.Errorf("no progress for %v (at %d, after %v)", stall, last, now.Sub(begin).Round(time.Millisecond))
			return false
		case now.Sub(begin) >= limit:
			Record(tb, name, "<", longest, stall)
			tb.Errorf("not done within %v, still progressing (at %d)", limit, last)
			return false
		}
		time.Sleep(tick)
	}
}

// Record appends observed op bound (op is one of <, <=, >, >=) with its
// margin to the file named by Env, if set. It asserts nothing: the checks
// above call it; call it directly for a bound checked in another way.
func Record[T Number](tb testing.TB, name, op string, observed, bound T) {
	tb.Helper()
	path := os.Getenv(Env)
	if path == "" {
		return
	}
	line := fmt.Sprintf("%.4f\t%s/%s\t%v %s %v\n", Of(op, float64(observed), float64(bound)), tb.Name(), name, observed, op, bound)
	if err := appendLine(path, line); err != nil {
		tb.Errorf("margin: record %s: %v", name, err)
	}
}

// Of returns the margin of observed against bound under op: the distance
// to the bound, on the passing side positive, relative to |bound| (to 1
// when bound is 0).
func Of(op string, observed, bound float64) float64 {
	d := bound - observed // an upper bound
	if op == ">" || op == ">=" {
		d = observed - bound
	}
	scale := math.Abs(bound)
	if scale == 0 {
		scale = 1
	}
	return d / scale
}

// mu makes one process's lines whole; lines of several processes (test
// binaries run side by side) are whole too, each one write in append mode.
var mu sync.Mutex

func appendLine(path, line string) error {
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WatchLag measures how late this process's goroutines run while a test
// does its work: a goroutine wakes every 5 ms and records how much later
// than asked it woke. The returned function stops it and returns the most
// it was late. A bound on when handlers start, which load stretches as it
// stretches that wake-up, adds this lag to its slack: the slack then
// follows the load the test actually met.
func WatchLag(tb testing.TB) (stop func() time.Duration) {
	tb.Helper()
	const every = 5 * time.Millisecond
	done := make(chan struct{})
	result := make(chan time.Duration, 1)
	go func() {
		var most time.Duration
		next := time.Now().Add(every)
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- most
				return
			case now := <-t.C:
				most = max(most, now.Sub(next))
				next = time.Now().Add(every)
				t.Reset(every)
			}
		}
	}()
	var once sync.Once
	var most time.Duration
	stop = func() time.Duration {
		once.Do(func() {
			close(done)
			most = <-result
		})
		return most
	}
	tb.Cleanup(func() { stop() })
	return stop
}
