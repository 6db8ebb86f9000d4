// Package cli holds what the delaystream command and its web view share
// beyond package admin: [Connect], which builds a Redis client from a URL
// (single server, Cluster seeds, TLS), and [Preview], which renders a
// payload for a human (text as is, msgpack as JSON, anything else in hex).
package cli
