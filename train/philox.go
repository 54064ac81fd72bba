package train

import "github.com/fedaudit/fedaudit/internal/philox"

// streamOthers is the client slot of the noise drawn once for the sum of the non-target
// clients' noise.
const streamOthers = 0xFFFFFFFF

// RunSeed is the seed of pair p's two runs: SplitMix64(SplitMix64(master) XOR p). Both worlds of
// a pair use it, so they share noise, client participation and Poisson sampling.
func RunSeed(master uint64, pair int) uint64 {
	return philox.SplitMix64(philox.SplitMix64(master) ^ uint64(pair))
}
