package delaystream

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfterSeconds is the largest number of seconds a time.Duration
// holds.
const maxRetryAfterSeconds = math.MaxInt64 / uint64(time.Second)

// ParseRetryAfter returns how long an HTTP Retry-After header value asks
// to wait, from now: value is either a number of seconds (delay-seconds:
// ASCII digits only, "120") or an HTTP date (RFC 9110 section 10.2.3), in
// any of the three formats a recipient must accept (RFC 9110 section
// 5.6.7, as net/http.ParseTime reads them: "Sun, 06 Nov 1994 08:49:37 GMT",
// "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"). Spaces
// around value are ignored. A date at or before now gives 0. A number of
// seconds larger than a time.Duration holds (about 292 years) is capped:
// it gives the largest time.Duration, so bound the wait before using it.
// Anything else (empty, a sign, a fraction, another date format) is an
// error wrapping [ErrInvalidOption].
//
// A handler that called a rate-limited downstream retries when it asks,
// within a bound of its own, and after the group's backoff when the header
// is missing or unreadable:
//
//	if resp.StatusCode == http.StatusTooManyRequests {
//		err := fmt.Errorf("downstream: %s", resp.Status)
//		wait, perr := delaystream.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
//		if perr != nil {
//			return err // the group's backoff
//		}
//		return delaystream.RetryAfter(min(wait, time.Hour), err)
//	}
func ParseRetryAfter(value string, now time.Time) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		// Digits only: ParseUint fails only when the number overflows.
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > maxRetryAfterSeconds {
			return math.MaxInt64, nil
		}
		return time.Duration(n) * time.Second, nil
	}
	for _, layout := range httpDates {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now), 0), nil
		}
	}
	return 0, fmt.Errorf("%w: Retry-After %q: want a number of seconds or an HTTP date", ErrInvalidOption, value)
}

// httpDates are the HTTP date formats a recipient must accept (RFC 9110
// section 5.6.7), as net/http.ParseTime reads them (the core package does
// not import net/http): IMF-fixdate, RFC 850 and asctime.
var httpDates = []string{"Mon, 02 Jan 2006 15:04:05 GMT", time.RFC850, time.ANSIC}
