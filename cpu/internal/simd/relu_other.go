//go:build !amd64 || purego

package simd

func reluAVX2(int, *float32, *float32) { panic("simd: no AVX2") }

func reluGradAVX2(int, *float32, *float32) { panic("simd: no AVX2") }
