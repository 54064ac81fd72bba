//go:build !purego

package simd

import "golang.org/x/sys/cpu"

// useAVX2 and useAVX512 select the SIMD paths; every path computes the same operations in the
// same order as the portable Go one, so the choice never changes a result.
var (
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useAVX512 = useAVX2 && cpu.X86.HasAVX512F
)
