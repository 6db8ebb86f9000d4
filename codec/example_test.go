package codec_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/delaystream/delaystream/codec"
)

// An envelope round trip: ID and Due are not part of the bytes.
func ExampleMarshalEnvelope() {
	b := codec.MarshalEnvelope(&codec.Envelope{
		ID:      "order:5001:cancel", // not encoded
		Payload: []byte(`{"order":5001}`),
		Headers: map[string]string{"tenant": "acme"},
		Attempt: 1,
		Created: time.UnixMilli(1_700_000_000_000),
	})
	fmt.Printf("header % x\n", b[:2])

	var e codec.Envelope
	if err := codec.UnmarshalEnvelope(b, &e); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("id=%q payload=%s headers=%v attempt=%d created=%d\n",
		e.ID, e.Payload, e.Headers, e.Attempt, e.Created.UnixMilli())
	// Output:
	// header d5 01
	// id="" payload={"order":5001} headers=map[tenant:acme] attempt=1 created=1700000000000
}

// Bytes that are not an envelope fail with an *EnvelopeError.
func ExampleUnmarshalEnvelope() {
	var e codec.Envelope
	err := codec.UnmarshalEnvelope([]byte("hello"), &e)
	fmt.Println(errors.Is(err, codec.ErrUnknownFormat))

	var ee *codec.EnvelopeError
	if errors.As(err, &ee) {
		fmt.Println(ee.Detail)
	}

	err = codec.UnmarshalEnvelope([]byte{codec.EnvelopeMagic, codec.EnvelopeVersion, 0x80}, &e)
	fmt.Println(errors.Is(err, codec.ErrCorrupt), err)
	// Output:
	// true
	// missing envelope magic byte
	// true codec: corrupt envelope: bad varint in attempt
}

// A value round trip through the default codec.
func ExampleMsgpack() {
	type reminder struct {
		User string `msgpack:"user"`
		Text string `msgpack:"text"`
	}
	b, err := codec.Msgpack.Marshal(reminder{User: "ann", Text: "stand up"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var r reminder
	if err := codec.Msgpack.Unmarshal(b, &r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d bytes: %+v\n", len(b), r)
	// Output:
	// 24 bytes: {User:ann Text:stand up}
}

// JSON is readable with redis-cli and by consumers in other languages.
func ExampleJSON() {
	b, _ := codec.JSON.Marshal(map[string]int{"order": 5001})
	fmt.Println(string(b))
	var v map[string]int
	_ = codec.JSON.Unmarshal(b, &v)
	fmt.Println(v["order"])
	// Output:
	// {"order":5001}
	// 5001
}

// Raw passes bytes and strings through and refuses anything else.
func ExampleRaw() {
	b, _ := codec.Raw.Marshal("ping")
	var s string
	_ = codec.Raw.Unmarshal(b, &s)
	fmt.Println(s)

	_, err := codec.Raw.Marshal(42)
	fmt.Println(err)
	// Output:
	// ping
	// codec: raw marshal: unsupported type int (want []byte or string)
}
