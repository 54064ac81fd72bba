//go:build gpu

package cuda

// cuBLAS is loaded at run time (package cuda/internal/cublasdl) instead of linked: the
// binary then has no dependency on one cuBLAS soname, and the same build runs with the cuBLAS
// 11, 12 or 13 of the node it lands on. gorgonia.org/cu/blas is not used: it has no batched
// GEMM, takes device memory as Go slices (a uintptr-to-pointer conversion that go vet and
// checkptr reject) and keeps its handle private.

import (
	"fmt"

	"github.com/fedaudit/fedaudit/cuda/internal/cublasdl"
)

type blasHandle struct {
	lib  *cublasdl.Library
	h    *cublasdl.Handle
	tf32 bool // the handle's math mode (false: CUBLAS_DEFAULT_MATH, as created)
}

// newBLAS creates a handle on the current context issuing on stream; the caller holds the
// context.
func newBLAS(stream uintptr) (*blasHandle, error) {
	lib, err := cublasdl.Load()
	if err != nil {
		return nil, fmt.Errorf("cublas: %w", err)
	}
	h, err := lib.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("cublas %s (%s): %w", lib.Version, lib.File, err)
	}
	if err := h.SetStream(stream); err != nil {
		h.Close()
		return nil, fmt.Errorf("cublas %s (%s): %w", lib.Version, lib.File, err)
	}
	return &blasHandle{lib: lib, h: h}, nil
}

func (b *blasHandle) close() error {
	if err := b.h.Close(); err != nil {
		return fmt.Errorf("cublas: %w", err)
	}
	return nil
}

func (b *blasHandle) gemm(g GemmArgs) error {
	if g.Math == MathBF16 {
		// The compute type, not the handle's math mode, decides GemmStridedBatchedEx.
		if err := b.h.SgemmBF16(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, g.A, g.LDA, g.StrideA,
			g.B, g.LDB, g.StrideB, g.Beta, g.C, g.LDC, g.StrideC, g.Batch); err != nil {
			return fmt.Errorf("cublas: %w", err)
		}
		return nil
	}
	if tf32 := g.Math == MathTF32; tf32 != b.tf32 {
		if err := b.h.SetTF32(tf32); err != nil {
			return fmt.Errorf("cublas: %w", err)
		}
		b.tf32 = tf32
	}
	if err := b.h.Sgemm(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, g.A, g.LDA, g.StrideA,
		g.B, g.LDB, g.StrideB, g.Beta, g.C, g.LDC, g.StrideC, g.Batch); err != nil {
		return fmt.Errorf("cublas: %w", err)
	}
	return nil
}
