// Package memory reads a Redis server's memory settings (used memory,
// maxmemory and maxmemory-policy, from INFO memory, which works where
// CONFIG is disabled) and explains writes Redis refused for memory.
//
// A policy other than noeviction, with a memory limit set, lets Redis
// evict keys a queue needs (its envelopes, streams, leases): messages are
// then lost. The root package reports such a server at start and while it
// runs, and can refuse to run on it. A server whose INFO has no memory
// section (miniredis, some proxies) is reported as unknown, not as a
// problem.
package memory
