//go:build !purego

package simd

// max4RowsAVX2 is max4Go on windows consecutive windows of n values each (n a positive
// multiple of 8, windows positive): a, b, c, d advance by 2n per window, out by n.
//
//go:noescape
func max4RowsAVX2(windows, n int, a, b, c, d, out *float32)

// max4GradRowsAVX2 is max4GradGo on windows consecutive windows: inputs and outputs advance
// by 2n per window, gy by n.
//
//go:noescape
func max4GradRowsAVX2(windows, n int, a, b, c, d, gy, da, db, dc, dd *float32)
