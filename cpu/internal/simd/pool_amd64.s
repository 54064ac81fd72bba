//go:build !purego

#include "textflag.h"

// The 2x2 max-pooling windows over runs of samples (pool.go), eight samples at a time: the
// comparisons of max4Go as ordered greater-than compares (false when either side is NaN, as
// Go's >) and blends, so the same winner and the same bits.

// func max4RowsAVX2(windows, n int, a, b, c, d, out *float32)
// Windows consecutive windows of n values each (n a multiple of 8) of a row pair: a, b, c, d
// advance by 2n values (two pixels of n samples) per window, out by n.
TEXT ·max4RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ windows+0(FP), BX
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DI
	MOVQ c+32(FP), R8
	MOVQ d+40(FP), R9
	MOVQ out+48(FP), DX
max4rwin:
	MOVQ n+8(FP), CX
	XORQ AX, AX
max4rloop:
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS (DI)(AX*1), Y1
	VCMPPS $0x1e, Y0, Y1, Y4 // b > m
	VBLENDVPS Y4, Y1, Y0, Y0
	VMOVUPS (R8)(AX*1), Y2
	VCMPPS $0x1e, Y0, Y2, Y5 // c > m
	VBLENDVPS Y5, Y2, Y0, Y0
	VMOVUPS (R9)(AX*1), Y3
	VCMPPS $0x1e, Y0, Y3, Y6 // d > m
	VBLENDVPS Y6, Y3, Y0, Y0
	VMOVUPS Y0, (DX)(AX*1)
	ADDQ $32, AX
	SUBQ $8, CX
	JNZ  max4rloop
	LEAQ (SI)(AX*2), SI // AX is n values in bytes now
	LEAQ (DI)(AX*2), DI
	LEAQ (R8)(AX*2), R8
	LEAQ (R9)(AX*2), R9
	ADDQ AX, DX
	DECQ BX
	JNZ  max4rwin
	VZEROUPPER
	RET

// func max4GradRowsAVX2(windows, n int, a, b, c, d, gy, da, db, dc, dd *float32)
// The gradient on windows consecutive windows of a row pair: the inputs and the four outputs
// advance by 2n values per window, gy by n. With mb, mc, md the three compares' masks, the
// winner is d where md, else c where mc, else b where mb, else a; it gets 0 + g, the others +0.
TEXT ·max4GradRowsAVX2(SB), NOSPLIT, $0-88
	MOVQ windows+0(FP), BX
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DI
	MOVQ c+32(FP), R8
	MOVQ d+40(FP), R9
	MOVQ gy+48(FP), R10
	MOVQ da+56(FP), R11
	MOVQ db+64(FP), R12
	MOVQ dc+72(FP), R13
	MOVQ dd+80(FP), DX
	VXORPS Y15, Y15, Y15
max4grwin:
	MOVQ n+8(FP), CX
	XORQ AX, AX
max4grloop:
	VMOVUPS (R10)(AX*1), Y7
	VADDPS Y7, Y15, Y7       // 0 + g: -0 becomes +0
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS (DI)(AX*1), Y1
	VCMPPS $0x1e, Y0, Y1, Y4 // mb = b > m
	VBLENDVPS Y4, Y1, Y0, Y0
	VMOVUPS (R8)(AX*1), Y2
	VCMPPS $0x1e, Y0, Y2, Y5 // mc = c > m
	VBLENDVPS Y5, Y2, Y0, Y0
	VMOVUPS (R9)(AX*1), Y3
	VCMPPS $0x1e, Y0, Y3, Y6 // md = d > m
	VANDPS Y7, Y6, Y8        // dd = md & g
	VANDPS Y7, Y5, Y9
	VANDNPS Y9, Y6, Y9       // dc = ~md & mc & g
	VORPS Y6, Y5, Y10        // mc | md
	VANDPS Y7, Y4, Y11
	VANDNPS Y11, Y10, Y11    // db = ~(mc | md) & mb & g
	VORPS Y10, Y4, Y12       // mb | mc | md
	VANDNPS Y7, Y12, Y13     // da = ~(mb | mc | md) & g
	VMOVUPS Y13, (R11)(AX*1)
	VMOVUPS Y11, (R12)(AX*1)
	VMOVUPS Y9, (R13)(AX*1)
	VMOVUPS Y8, (DX)(AX*1)
	ADDQ $32, AX
	SUBQ $8, CX
	JNZ  max4grloop
	LEAQ (SI)(AX*2), SI
	LEAQ (DI)(AX*2), DI
	LEAQ (R8)(AX*2), R8
	LEAQ (R9)(AX*2), R9
	ADDQ AX, R10
	LEAQ (R11)(AX*2), R11
	LEAQ (R12)(AX*2), R12
	LEAQ (R13)(AX*2), R13
	LEAQ (DX)(AX*2), DX
	DECQ BX
	JNZ  max4grwin
	VZEROUPPER
	RET
