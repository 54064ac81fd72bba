//go:build !amd64 || purego

package simd

import "github.com/fedaudit/fedaudit/internal/philox"

// GaussianFloats sets z[i] = float32 of coordinate 4 j0 + i of the noise stream (key, round,
// stream).
func GaussianFloats(z []float32, key [2]uint32, j0, round, stream uint32) {
	philox.GaussianFloats(z, key, j0, round, stream)
}
