// Package jumphash maps keys to shards with jump consistent hashing (Lamping
// and Veach, 2014) of a fixed 64-bit hash of the key. The mapping is part of
// the dispatcher's contract: every process, and every version, must put a key
// on the same shard.
package jumphash

import "hash/fnv"

// Shard returns the shard, 0 to n−1, that key goes to; 0 when n <= 1. Every
// key keeps its shard when shards grow from n to n+1, except about 1/(n+1)
// of them, which move to the new shard. The hash is fixed (FNV-1a, then a
// SplitMix64 finaliser to spread similar keys), so every process, and every
// version, agrees on it.
func Shard(key string, n int) int {
	if n <= 1 {
		return 0
	}
	return Jump(Hash(key), n)
}

// Hash is FNV-1a of key, mixed: FNV alone leaves keys that differ in their
// last byte close together, and Jump's first steps would then agree too.
func Hash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // a hash.Hash never fails
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Jump maps key to one of buckets buckets, 0 to buckets−1, as in the paper:
// a pseudo-random walk seeded by key whose jumps land past buckets with the
// right odds. buckets must be at least 1 (for less it returns −1; Shard
// guards against that).
func Jump(key uint64, buckets int) int {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
