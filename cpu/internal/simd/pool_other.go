//go:build !amd64 || purego

package simd

func max4RowsAVX2(int, int, *float32, *float32, *float32, *float32, *float32) {
	panic("simd: no AVX2")
}

func max4GradRowsAVX2(int, int, *float32, *float32, *float32, *float32, *float32, *float32, *float32, *float32, *float32) {
	panic("simd: no AVX2")
}
