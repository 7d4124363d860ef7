package azdispatch

import "hash/fnv"

// KeyShard returns the shard, 0 to shards−1, that a keyed send puts key on.
// It is jump consistent hashing (Lamping and Veach, 2014) of a 64-bit hash
// of the key: every key keeps its shard when shards grow from n to n+1,
// except about 1/(n+1) of them, which move to the new shard. The hash is
// fixed (FNV-1a, then a SplitMix64 finaliser to spread similar keys), so
// every process, and every version of this package, agrees on it.
func KeyShard(key string, shards int) int {
	if shards <= 1 {
		return 0
	}
	return jump(keyHash(key), shards)
}

// keyHash is FNV-1a of key, mixed: FNV alone leaves keys that differ in their
// last byte close together, and jump's first steps would then agree too.
func keyHash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// jump maps key to one of buckets buckets, as in the paper: a pseudo-random
// walk seeded by the key whose jumps land past buckets with the right odds.
func jump(key uint64, buckets int) int {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
