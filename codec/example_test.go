package codec_test

import (
	"fmt"

	"github.com/delaystream/delaystream/codec"
)

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
