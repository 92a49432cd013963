package runtime

import "hash/fnv"

// splitMix is the SplitMix64 generator: tiny, fast and fully specified, so
// generated weights stay the same across Go releases.
type splitMix struct{ state uint64 }

func (r *splitMix) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniform returns a float32 uniform in [-1, 1).
func (r *splitMix) uniform() float32 {
	return float32(int32(r.next()>>32)) / (1 << 31)
}

// streamSeed derives the seed of one named tensor's stream.
func streamSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return seed ^ h.Sum64()
}

// fillUniform fills data with values uniform in [-bound, bound).
func fillUniform(data []float32, seed uint64, bound float32) {
	r := splitMix{state: seed}
	for i := range data {
		data[i] = bound * r.uniform()
	}
}
