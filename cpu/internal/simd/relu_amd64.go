//go:build !purego

package simd

// reluAVX2 is reluGo on n values, n a positive multiple of 8 (relu_amd64.s).
//
//go:noescape
func reluAVX2(n int, pre, post *float32)

// reluGradAVX2 is reluGradGo on n values, n a positive multiple of 8.
//
//go:noescape
func reluGradAVX2(n int, pre, grad *float32)
