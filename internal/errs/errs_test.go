package errs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMark(t *testing.T) {
	t.Parallel()
	name := fmt.Errorf("%w: group name is empty", ErrInvalidName)
	plain := errors.New("no such thing")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"matches already", fmt.Errorf("%w: nil handler", ErrInvalidOption), "delaystream: invalid option: nil handler"},
		{"another sentinel", name, "delaystream: invalid name: group name is empty"},
		{"another sentinel, wrapped", fmt.Errorf("consumer: %w", name), "consumer: delaystream: invalid name: group name is empty"},
		{"no sentinel", plain, "delaystream: invalid option: no such thing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Invalid(tc.err)
			assert.EqualError(t, got, tc.want)
			assert.ErrorIs(t, got, ErrInvalidOption)
			assert.ErrorIs(t, got, tc.err, "the cause still matches")
		})
	}
	assert.NoError(t, Invalid(nil))
	assert.ErrorIs(t, Invalid(name), ErrInvalidName)
	assert.NotErrorIs(t, Invalid(plain), ErrInvalidName)
}
