package wire

// ShardOfRandom returns the shard (0 <= shard < n) of every generated id
// whose random part (its last 16 characters, as [AppendRandomPart] makes
// them) is random: ShardOf(GeneratedID(due, random), n) for any due time
// of a generated id (0 <= due < 2^48). A producer uses it to route a
// message whose id is complete only once the shard's script has run (the
// time part is the due time, resolved against the Redis clock). It hashes
// like [ShardOf] (FNV-1a) without allocating.
func ShardOfRandom(random string, n int) int {
	if n <= 1 {
		return 0
	}
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for i := 0; i < len(random); i++ {
		h ^= uint32(random[i])
		h *= prime32
	}
	return int(h % uint32(n))
}
