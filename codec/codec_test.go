package codec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

type order struct {
	ID     int64             `json:"id" msgpack:"id"`
	Amount float64           `json:"amount" msgpack:"amount"`
	Tags   []string          `json:"tags" msgpack:"tags"`
	Meta   map[string]string `json:"meta" msgpack:"meta"`
	At     time.Time         `json:"at" msgpack:"at"`
}

func TestStructCodecsRoundTrip(t *testing.T) {
	t.Parallel()
	in := order{ID: 5001, Amount: 12.5, Tags: []string{"a", "b"}, Meta: map[string]string{"k": "v"},
		At: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	tests := []struct {
		name  string
		codec codec.Codec
		first byte // first byte of the encoding
	}{
		{"msgpack", codec.Msgpack, 0x85}, // fixmap of 5 entries
		{"json", codec.JSON, '{'},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := tt.codec.Marshal(in)
			require.NoError(t, err)
			require.NotEmpty(t, b)
			assert.Equal(t, tt.first, b[0])
			var out order
			require.NoError(t, tt.codec.Unmarshal(b, &out))
			assert.Equal(t, in.ID, out.ID)
			assert.Equal(t, in.Amount, out.Amount)
			assert.Equal(t, in.Tags, out.Tags)
			assert.Equal(t, in.Meta, out.Meta)
			assert.True(t, in.At.Equal(out.At))
		})
	}
}

func TestStructCodecsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		run     func() error
		message string
	}{
		{"msgpack marshal channel", func() error { _, err := codec.Msgpack.Marshal(make(chan int)); return err }, "codec: msgpack marshal chan int"},
		{"msgpack unmarshal garbage", func() error { var o order; return codec.Msgpack.Unmarshal([]byte{0xC1}, &o) }, "codec: msgpack unmarshal into *codec_test.order"},
		{"msgpack unmarshal non-pointer", func() error { return codec.Msgpack.Unmarshal([]byte{0x01}, order{}) }, "codec: msgpack unmarshal into codec_test.order"},
		{"json marshal func", func() error { _, err := codec.JSON.Marshal(func() {}); return err }, "codec: json marshal func()"},
		{"json unmarshal garbage", func() error { var o order; return codec.JSON.Unmarshal([]byte("{"), &o) }, "codec: json unmarshal into *codec_test.order"},
		{"json unmarshal wrong type", func() error { var o order; return codec.JSON.Unmarshal([]byte(`{"id":"x"}`), &o) }, "codec: json unmarshal into *codec_test.order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			require.NotPanics(t, func() { err = tt.run() })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.message)
		})
	}
}

func TestRawCodec(t *testing.T) {
	t.Parallel()
	t.Run("marshal bytes and string", func(t *testing.T) {
		t.Parallel()
		b, err := codec.Raw.Marshal([]byte{0, 1, 2})
		require.NoError(t, err)
		assert.Equal(t, []byte{0, 1, 2}, b)
		b, err = codec.Raw.Marshal("héllo")
		require.NoError(t, err)
		assert.Equal(t, []byte("héllo"), b)
		b, err = codec.Raw.Marshal([]byte(nil))
		require.NoError(t, err)
		assert.Empty(t, b)
	})
	t.Run("unmarshal into bytes copies", func(t *testing.T) {
		t.Parallel()
		src := []byte("data")
		var dst []byte
		require.NoError(t, codec.Raw.Unmarshal(src, &dst))
		src[0] = 'X'
		assert.Equal(t, []byte("data"), dst)
	})
	t.Run("unmarshal into string", func(t *testing.T) {
		t.Parallel()
		var s string
		require.NoError(t, codec.Raw.Unmarshal([]byte("text"), &s))
		assert.Equal(t, "text", s)
	})
	unsupported := []struct {
		name string
		run  func() error
		want string
	}{
		{"marshal int", func() error { _, err := codec.Raw.Marshal(42); return err }, "codec: raw marshal: unsupported type int (want []byte or string)"},
		{"marshal nil", func() error { _, err := codec.Raw.Marshal(nil); return err }, "codec: raw marshal: unsupported type <nil>"},
		{"marshal struct", func() error { _, err := codec.Raw.Marshal(order{}); return err }, "unsupported type codec_test.order"},
		{"marshal *string", func() error { s := "x"; _, err := codec.Raw.Marshal(&s); return err }, "unsupported type *string"},
		{"unmarshal into []byte value", func() error { return codec.Raw.Unmarshal([]byte("x"), []byte{}) }, "codec: raw unmarshal: unsupported type []uint8 (want *[]byte or *string)"},
		{"unmarshal into *int", func() error { var n int; return codec.Raw.Unmarshal([]byte("1"), &n) }, "unsupported type *int"},
		{"unmarshal into nil", func() error { return codec.Raw.Unmarshal([]byte("1"), nil) }, "unsupported type <nil>"},
	}
	for _, tt := range unsupported {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			require.NotPanics(t, func() { err = tt.run() })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// Payloads produced by a Codec travel inside an envelope unchanged.
func TestCodecInsideEnvelope(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]codec.Codec{"msgpack": codec.Msgpack, "json": codec.JSON} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := c.Marshal(order{ID: 7})
			require.NoError(t, err)
			b := wire.MarshalEnvelope(&codec.Envelope{Payload: p, Attempt: 1})
			var e codec.Envelope
			require.NoError(t, wire.UnmarshalEnvelope(b, &e))
			var o order
			require.NoError(t, c.Unmarshal(e.Payload, &o))
			assert.Equal(t, int64(7), o.ID)
		})
	}
}
