package admin_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// Locate finds a message of a queue by name: dead-lettered in one group,
// handled by the other; an unknown queue wraps ErrNotFound.
func TestLocate(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()
	loc, err := in.Locate(ctx, "jobs", "job-3")
	require.NoError(t, err)
	require.Len(t, loc.Groups, 1)
	assert.Equal(t, "billing", loc.Groups[0].Group)
	assert.Equal(t, delaystream.PlaceDeadLettered, loc.Groups[0].Place)
	assert.Equal(t, delaystream.ReasonHandler, loc.Groups[0].Reason)

	loc, err = in.Locate(ctx, "orders", "later")
	require.NoError(t, err)
	require.NotNil(t, loc.Waiting)

	_, err = in.Locate(ctx, "nosuch", "x")
	require.ErrorIs(t, err, delaystream.ErrNotFound)
}
