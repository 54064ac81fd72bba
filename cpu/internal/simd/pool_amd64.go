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

// max4RowsAVX2 is max4AVX2 on windows consecutive windows of n values each (n a positive
// multiple of 8, windows positive): a, b, c, d advance by 2n per window, out by n.
//
//go:noescape
func max4RowsAVX2(windows, n int, a, b, c, d, out *float32)

// max4GradRowsAVX2 is max4GradAVX2 on windows consecutive windows: inputs and outputs advance
// by 2n per window, gy by n.
//
//go:noescape
func max4GradRowsAVX2(windows, n int, a, b, c, d, gy, da, db, dc, dd *float32)
