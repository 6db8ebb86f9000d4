// Package optcheck holds the checks the option functions of delay, mover,
// group and the front door share, so that a bad value gets the same error
// shape everywhere: "<package>: invalid option: <what> must be <lo>..<hi>,
// got <v>", wrapping the package's ErrInvalidOption.
package optcheck

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/stream"
)

// Range returns an error wrapping invalid when v is outside lo..hi, nil
// otherwise. Durations print without trailing zero units ("1m", not "1m0s").
func Range[T cmp.Ordered](invalid error, name string, v, lo, hi T) error {
	if v < lo || v > hi {
		return fmt.Errorf("%w: %s must be %s..%s, got %s", invalid, name, show(lo), show(hi), show(v))
	}
	return nil
}

// Prefix returns an error wrapping invalid when p is not a valid key prefix
// (stream.ValidateName).
func Prefix(invalid error, p string) error {
	if err := stream.ValidateName("prefix", p); err != nil {
		return errs.Mark(err, invalid) // one prefix: "delaystream: invalid name: ..."
	}
	return nil
}

// NotNil returns an error wrapping invalid ("nil <what>") when isNil.
func NotNil(invalid error, what string, isNil bool) error {
	if isNil {
		return fmt.Errorf("%w: nil %s", invalid, what)
	}
	return nil
}

func show(v any) string {
	if d, ok := v.(time.Duration); ok {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return fmt.Sprint(v)
}

// Apply applies opts to c in order, refusing a nil option with an error
// wrapping invalid; it returns the first option's error.
func Apply[C any, O ~func(*C) error](invalid error, c *C, opts []O) error {
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil option", invalid)
		}
		if err := opt(c); err != nil {
			return err
		}
	}
	return nil
}
