//go:build !amd64 || purego

package simd

var useAVX2, useAVX512 = false, false
