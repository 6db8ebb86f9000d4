package codec

import (
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Codec encodes and decodes the values of typed producers and consumers.
// Implementations must be safe for concurrent use.
type Codec interface {
	// Marshal returns the encoding of v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, which is a non-nil pointer.
	Unmarshal(data []byte, v any) error
}

// Compile-time checks that the provided codecs implement Codec.
var (
	_ Codec = msgpackCodec{}
	_ Codec = jsonCodec{}
	_ Codec = rawCodec{}
)

// Msgpack is the default codec: compact and fast, it encodes structs by field
// name (msgpack tags are honoured).
var Msgpack Codec = msgpackCodec{}

// JSON encodes with encoding/json: larger and slower than Msgpack but
// readable with redis-cli and by non-Go consumers.
var JSON Codec = jsonCodec{}

// Raw passes bytes through unchanged. It marshals []byte and string and
// unmarshals into *[]byte and *string; any other type is an error.
var Raw Codec = rawCodec{}

// msgpackCodec is the type of [Msgpack].
type msgpackCodec struct{}

// Marshal encodes v as msgpack.
func (msgpackCodec) Marshal(v any) ([]byte, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("codec: msgpack marshal %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes msgpack data into v.
func (msgpackCodec) Unmarshal(data []byte, v any) error {
	if err := msgpack.Unmarshal(data, v); err != nil {
		return fmt.Errorf("codec: msgpack unmarshal into %T: %w", v, err)
	}
	return nil
}

// jsonCodec is the type of [JSON].
type jsonCodec struct{}

// Marshal encodes v as JSON.
func (jsonCodec) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("codec: json marshal %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes JSON data into v.
func (jsonCodec) Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("codec: json unmarshal into %T: %w", v, err)
	}
	return nil
}

// rawCodec is the type of [Raw].
type rawCodec struct{}

// Marshal returns v's bytes when v is a []byte or a string.
func (rawCodec) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	default:
		return nil, fmt.Errorf("codec: raw marshal: unsupported type %T (want []byte or string)", v)
	}
}

// Unmarshal stores a copy of data in v, which must be a *[]byte or *string.
func (rawCodec) Unmarshal(data []byte, v any) error {
	switch x := v.(type) {
	case *[]byte:
		*x = append([]byte(nil), data...)
		return nil
	case *string:
		*x = string(data)
		return nil
	default:
		return fmt.Errorf("codec: raw unmarshal: unsupported type %T (want *[]byte or *string)", v)
	}
}
