// Package shards holds what the parts of a sharded queue share beyond its
// key layout: the check of the queue's recorded shard count, which every
// producer, mover and consumer makes before its first write.
package shards
