//go:build !purego

package simd

// max4AVX2 is max4Go on n values, n a positive multiple of 8 (pool_amd64.s).
//
//go:noescape
func max4AVX2(n int, a, b, c, d, out *float32)

// max4GradAVX2 is max4GradGo on n values, n a positive multiple of 8.
//
//go:noescape
func max4GradAVX2(n int, a, b, c, d, gy, da, db, dc, dd *float32)
