//go:build !purego

#include "textflag.h"

// Constants of tanh32 (tanh.go) as float64 bit patterns, each repeated in four lanes: AVX2
// has no broadcast memory operand, and a 32-byte operand must hold the constant four times.
DATA tanhk<>+0(SB)/8, $0x7fffffffffffffff // |x| mask
DATA tanhk<>+8(SB)/8, $0x7fffffffffffffff
DATA tanhk<>+16(SB)/8, $0x7fffffffffffffff
DATA tanhk<>+24(SB)/8, $0x7fffffffffffffff
DATA tanhk<>+32(SB)/8, $0x8000000000000000 // sign mask
DATA tanhk<>+40(SB)/8, $0x8000000000000000
DATA tanhk<>+48(SB)/8, $0x8000000000000000
DATA tanhk<>+56(SB)/8, $0x8000000000000000
DATA tanhk<>+64(SB)/8, $0x4044000000000000 // clamp 40
DATA tanhk<>+72(SB)/8, $0x4044000000000000
DATA tanhk<>+80(SB)/8, $0x4044000000000000
DATA tanhk<>+88(SB)/8, $0x4044000000000000
DATA tanhk<>+96(SB)/8, $0x3ff71547652b82fe // log2 e
DATA tanhk<>+104(SB)/8, $0x3ff71547652b82fe
DATA tanhk<>+112(SB)/8, $0x3ff71547652b82fe
DATA tanhk<>+120(SB)/8, $0x3ff71547652b82fe
DATA tanhk<>+128(SB)/8, $0x4338000000000000 // 1.5 * 2^52
DATA tanhk<>+136(SB)/8, $0x4338000000000000
DATA tanhk<>+144(SB)/8, $0x4338000000000000
DATA tanhk<>+152(SB)/8, $0x4338000000000000
DATA tanhk<>+160(SB)/8, $0x3fe62e42fee00000 // ln 2, high part
DATA tanhk<>+168(SB)/8, $0x3fe62e42fee00000
DATA tanhk<>+176(SB)/8, $0x3fe62e42fee00000
DATA tanhk<>+184(SB)/8, $0x3fe62e42fee00000
DATA tanhk<>+192(SB)/8, $0x3dea39ef35793c76 // ln 2, low part
DATA tanhk<>+200(SB)/8, $0x3dea39ef35793c76
DATA tanhk<>+208(SB)/8, $0x3dea39ef35793c76
DATA tanhk<>+216(SB)/8, $0x3dea39ef35793c76
DATA tanhk<>+224(SB)/8, $0x3ff0000000000000 // 1
DATA tanhk<>+232(SB)/8, $0x3ff0000000000000
DATA tanhk<>+240(SB)/8, $0x3ff0000000000000
DATA tanhk<>+248(SB)/8, $0x3ff0000000000000
DATA tanhk<>+256(SB)/8, $0x4000000000000000 // 2
DATA tanhk<>+264(SB)/8, $0x4000000000000000
DATA tanhk<>+272(SB)/8, $0x4000000000000000
DATA tanhk<>+280(SB)/8, $0x4000000000000000
DATA tanhk<>+288(SB)/8, $0x3f1a36e2eb1c432d // 1e-4
DATA tanhk<>+296(SB)/8, $0x3f1a36e2eb1c432d
DATA tanhk<>+304(SB)/8, $0x3f1a36e2eb1c432d
DATA tanhk<>+312(SB)/8, $0x3f1a36e2eb1c432d
DATA tanhk<>+320(SB)/8, $0x3e5ae64567f544e4 // 1/11!
DATA tanhk<>+328(SB)/8, $0x3e5ae64567f544e4
DATA tanhk<>+336(SB)/8, $0x3e5ae64567f544e4
DATA tanhk<>+344(SB)/8, $0x3e5ae64567f544e4
DATA tanhk<>+352(SB)/8, $0x3e927e4fb7789f5c // 1/10!
DATA tanhk<>+360(SB)/8, $0x3e927e4fb7789f5c
DATA tanhk<>+368(SB)/8, $0x3e927e4fb7789f5c
DATA tanhk<>+376(SB)/8, $0x3e927e4fb7789f5c
DATA tanhk<>+384(SB)/8, $0x3ec71de3a556c734 // 1/9!
DATA tanhk<>+392(SB)/8, $0x3ec71de3a556c734
DATA tanhk<>+400(SB)/8, $0x3ec71de3a556c734
DATA tanhk<>+408(SB)/8, $0x3ec71de3a556c734
DATA tanhk<>+416(SB)/8, $0x3efa01a01a01a01a // 1/8!
DATA tanhk<>+424(SB)/8, $0x3efa01a01a01a01a
DATA tanhk<>+432(SB)/8, $0x3efa01a01a01a01a
DATA tanhk<>+440(SB)/8, $0x3efa01a01a01a01a
DATA tanhk<>+448(SB)/8, $0x3f2a01a01a01a01a // 1/7!
DATA tanhk<>+456(SB)/8, $0x3f2a01a01a01a01a
DATA tanhk<>+464(SB)/8, $0x3f2a01a01a01a01a
DATA tanhk<>+472(SB)/8, $0x3f2a01a01a01a01a
DATA tanhk<>+480(SB)/8, $0x3f56c16c16c16c17 // 1/6!
DATA tanhk<>+488(SB)/8, $0x3f56c16c16c16c17
DATA tanhk<>+496(SB)/8, $0x3f56c16c16c16c17
DATA tanhk<>+504(SB)/8, $0x3f56c16c16c16c17
DATA tanhk<>+512(SB)/8, $0x3f81111111111111 // 1/5!
DATA tanhk<>+520(SB)/8, $0x3f81111111111111
DATA tanhk<>+528(SB)/8, $0x3f81111111111111
DATA tanhk<>+536(SB)/8, $0x3f81111111111111
DATA tanhk<>+544(SB)/8, $0x3fa5555555555555 // 1/4!
DATA tanhk<>+552(SB)/8, $0x3fa5555555555555
DATA tanhk<>+560(SB)/8, $0x3fa5555555555555
DATA tanhk<>+568(SB)/8, $0x3fa5555555555555
DATA tanhk<>+576(SB)/8, $0x3fc5555555555555 // 1/3!
DATA tanhk<>+584(SB)/8, $0x3fc5555555555555
DATA tanhk<>+592(SB)/8, $0x3fc5555555555555
DATA tanhk<>+600(SB)/8, $0x3fc5555555555555
DATA tanhk<>+608(SB)/8, $0x3fe0000000000000 // 1/2
DATA tanhk<>+616(SB)/8, $0x3fe0000000000000
DATA tanhk<>+624(SB)/8, $0x3fe0000000000000
DATA tanhk<>+632(SB)/8, $0x3fe0000000000000
GLOBL tanhk<>(SB), RODATA|NOPTR, $640

// func tanhAVX2(n int, x, y *float32)
// y[i] = tanh32(x[i]) for i < n (n > 0, a multiple of 4): the operations of tanh32 on four
// float64 lanes, in the same order.
TEXT ·tanhAVX2(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	SHRQ $2, CX
	VBROADCASTSD tanhk<>+64(SB), Y13 // clamp
	VBROADCASTSD tanhk<>+128(SB), Y14 // magic
	VBROADCASTSD tanhk<>+224(SB), Y15 // 1

loop:
	VCVTPS2PD (SI), Y0                   // x
	VBROADCASTSD tanhk<>+0(SB), Y1
	VANDPD Y0, Y1, Y1                    // a = |x|
	VADDPD Y1, Y1, Y2                    // y = a + a
	VMINPD Y2, Y13, Y2                   // y = 40 < y ? 40 : y (a NaN y stays)
	VMOVAPD Y14, Y3
	VFMADD231PD tanhk<>+96(SB), Y2, Y3  // t = y log2e + magic
	VSUBPD Y14, Y3, Y4                   // n = t - magic
	VFNMADD231PD tanhk<>+160(SB), Y4, Y2 // r = y - n ln2hi
	VFNMADD231PD tanhk<>+192(SB), Y4, Y2 // r -= n ln2lo
	VBROADCASTSD tanhk<>+320(SB), Y5      // p = 1/11!
	VFMADD213PD tanhk<>+352(SB), Y2, Y5  // p = p r + c
	VFMADD213PD tanhk<>+384(SB), Y2, Y5
	VFMADD213PD tanhk<>+416(SB), Y2, Y5
	VFMADD213PD tanhk<>+448(SB), Y2, Y5
	VFMADD213PD tanhk<>+480(SB), Y2, Y5
	VFMADD213PD tanhk<>+512(SB), Y2, Y5
	VFMADD213PD tanhk<>+544(SB), Y2, Y5
	VFMADD213PD tanhk<>+576(SB), Y2, Y5
	VFMADD213PD tanhk<>+608(SB), Y2, Y5
	VFMADD213PD Y15, Y2, Y5
	VFMADD213PD Y15, Y2, Y5
	VPSLLQ $52, Y3, Y6
	VPADDQ Y15, Y6, Y6                   // 2^n
	VMULPD Y6, Y5, Y5                    // e = p 2^n
	VADDPD Y15, Y5, Y5                   // e + 1
	VBROADCASTSD tanhk<>+256(SB), Y7
	VDIVPD Y5, Y7, Y7                    // 2/(e+1)
	VSUBPD Y7, Y15, Y8                   // 1 - 2/(e+1)
	VBROADCASTSD tanhk<>+32(SB), Y9
	VANDPD Y0, Y9, Y9
	VORPD Y9, Y8, Y8                     // sign of x
	VBROADCASTSD tanhk<>+288(SB), Y10
	VCMPPD $1, Y10, Y1, Y10              // a < 1e-4
	VBLENDVPD Y10, Y0, Y8, Y8            // then x itself
	VCVTPD2PSY Y8, X8
	VMOVUPS X8, (DI)
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET

// func tanhAVX512(n int, x, y *float32)
// tanhAVX2 on eight float64 lanes (n > 0, a multiple of 8): the same operations in the same
// order, with mask registers for the small-argument case.
TEXT ·tanhAVX512(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	SHRQ $3, CX
	VBROADCASTSD tanhk<>+64(SB), Z13  // clamp
	VBROADCASTSD tanhk<>+128(SB), Z14 // magic
	VBROADCASTSD tanhk<>+224(SB), Z15 // 1
	VBROADCASTSD tanhk<>+0(SB), Z16   // |x| mask
	VBROADCASTSD tanhk<>+32(SB), Z17  // sign mask
	VBROADCASTSD tanhk<>+256(SB), Z18 // 2
	VBROADCASTSD tanhk<>+288(SB), Z19 // small

loop512:
	VCVTPS2PD (SI), Z0
	VPANDQ Z0, Z16, Z1                    // a = |x|
	VADDPD Z1, Z1, Z2                     // y = a + a
	VMINPD Z2, Z13, Z2                    // y = 40 < y ? 40 : y (a NaN y stays)
	VMOVAPD Z14, Z3
	VFMADD231PD.BCST tanhk<>+96(SB), Z2, Z3   // t = y log2e + magic
	VSUBPD Z14, Z3, Z4                        // n = t - magic
	VFNMADD231PD.BCST tanhk<>+160(SB), Z4, Z2 // r = y - n ln2hi
	VFNMADD231PD.BCST tanhk<>+192(SB), Z4, Z2 // r -= n ln2lo
	VBROADCASTSD tanhk<>+320(SB), Z5          // p = 1/11!
	VFMADD213PD.BCST tanhk<>+352(SB), Z2, Z5  // p = p r + c
	VFMADD213PD.BCST tanhk<>+384(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+416(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+448(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+480(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+512(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+544(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+576(SB), Z2, Z5
	VFMADD213PD.BCST tanhk<>+608(SB), Z2, Z5
	VFMADD213PD Z15, Z2, Z5
	VFMADD213PD Z15, Z2, Z5
	VPSLLQ $52, Z3, Z6
	VPADDQ Z15, Z6, Z6                    // 2^n
	VMULPD Z6, Z5, Z5                     // e = p 2^n
	VADDPD Z15, Z5, Z5                    // e + 1
	VDIVPD Z5, Z18, Z7                    // 2/(e+1)
	VSUBPD Z7, Z15, Z8                    // 1 - 2/(e+1)
	VPANDQ Z0, Z17, Z9
	VPORQ Z9, Z8, Z8                      // sign of x
	VCMPPD $1, Z19, Z1, K1                // a < 1e-4
	VBLENDMPD Z0, Z8, K1, Z8              // then x itself
	VCVTPD2PS Z8, Y8
	VMOVUPS Y8, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop512
	VZEROUPPER
	RET

DATA onef32<>+0(SB)/4, $0x3f800000
GLOBL onef32<>(SB), RODATA|NOPTR, $4

// func tanhGradAVX2(n int, post, grad *float32)
// g[i] *= 1 - h[i] h[i] for i < n (n > 0, a multiple of 8): multiply, subtract, multiply, each
// rounded (no fused operation), as activateGrad computes it.
TEXT ·tanhGradAVX2(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ post+8(FP), SI
	MOVQ grad+16(FP), DI
	SHRQ $3, CX
	VBROADCASTSS onef32<>+0(SB), Y3
tgloop:
	VMOVUPS (SI), Y0
	VMULPS Y0, Y0, Y0
	VSUBPS Y0, Y3, Y0
	VMULPS (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  tgloop
	VZEROUPPER
	RET
