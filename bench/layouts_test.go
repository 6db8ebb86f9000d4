package main

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
)

func TestULIDBytes(t *testing.T) {
	t.Parallel()
	// The example of the ULID specification.
	got := ulidBytes("01ARZ3NDEKTSV4RRFFQ69G5FAV")
	assert.Equal(t, "01563e3ab5d3d6764c61efb99302bd5b", hex.EncodeToString([]byte(got)))
	// Generated ids: 16 bytes, distinct, led by the creation millisecond.
	a, b := ulidBytes(delay.NewID()), ulidBytes(delay.NewID())
	require.Len(t, a, 16)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a[:4], b[:4], "ids made within the same ~65 s share their top time bytes")
}

func TestMergedMembers(t *testing.T) {
	t.Parallel()
	z := mergedMembers([]string{"id1"}, [][]byte{[]byte("env")}, []int64{42})
	require.Len(t, z, 1)
	assert.Equal(t, float64(42), z[0].Score)
	assert.Equal(t, []byte("\x03id1env"), z[0].Member)
}
