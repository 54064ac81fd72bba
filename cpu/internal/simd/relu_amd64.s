//go:build !purego

#include "textflag.h"

// ReLU and its gradient (relu.go), eight values at a time.

// func reluAVX2(n int, pre, post *float32)
// post = MAXPS(0, v) + 0: MAXPS returns its second operand v unless 0 > v, so a NaN stays (as
// Go's max), and adding +0 turns the -0 it returns for v = -0 into +0 (as Go's max(-0, 0)).
TEXT ·reluAVX2(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ pre+8(FP), SI
	MOVQ post+16(FP), DI
	VXORPS Y1, Y1, Y1
	XORQ AX, AX
reluloop:
	VMOVUPS (SI)(AX*1), Y0
	VMAXPS Y0, Y1, Y2 // Intel order: max(Y1 = 0, Y0 = v)
	VADDPS Y1, Y2, Y2
	VMOVUPS Y2, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $8, CX
	JNZ  reluloop
	VZEROUPPER
	RET

// func reluGradAVX2(n int, pre, grad *float32)
// g = ANDN(v <= 0, g): the ordered compare is false for NaN, so g stays there, as in Go.
TEXT ·reluGradAVX2(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ pre+8(FP), SI
	MOVQ grad+16(FP), DI
	VXORPS Y1, Y1, Y1
	XORQ AX, AX
relugloop:
	VMOVUPS (SI)(AX*1), Y0
	VCMPPS $0x12, Y1, Y0, Y2 // v <= 0, ordered, quiet
	VMOVUPS (DI)(AX*1), Y3
	VANDNPS Y3, Y2, Y3 // ~mask & g
	VMOVUPS Y3, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $8, CX
	JNZ  relugloop
	VZEROUPPER
	RET
