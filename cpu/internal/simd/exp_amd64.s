//go:build !purego

#include "textflag.h"

// Constants of exp64 (exp.go) as float64 bit patterns, each repeated in four lanes (AVX2 has
// no broadcast memory operand).
DATA expk<>+0(SB)/8, $0xc086200000000000 // -708
DATA expk<>+8(SB)/8, $0xc086200000000000
DATA expk<>+16(SB)/8, $0xc086200000000000
DATA expk<>+24(SB)/8, $0xc086200000000000
DATA expk<>+32(SB)/8, $0x4086280000000000 // 709
DATA expk<>+40(SB)/8, $0x4086280000000000
DATA expk<>+48(SB)/8, $0x4086280000000000
DATA expk<>+56(SB)/8, $0x4086280000000000
DATA expk<>+64(SB)/8, $0x3ff71547652b82fe // log2 e
DATA expk<>+72(SB)/8, $0x3ff71547652b82fe
DATA expk<>+80(SB)/8, $0x3ff71547652b82fe
DATA expk<>+88(SB)/8, $0x3ff71547652b82fe
DATA expk<>+96(SB)/8, $0x4338000000000000 // 1.5 * 2^52
DATA expk<>+104(SB)/8, $0x4338000000000000
DATA expk<>+112(SB)/8, $0x4338000000000000
DATA expk<>+120(SB)/8, $0x4338000000000000
DATA expk<>+128(SB)/8, $0x3fe62e42fee00000 // ln 2, high part
DATA expk<>+136(SB)/8, $0x3fe62e42fee00000
DATA expk<>+144(SB)/8, $0x3fe62e42fee00000
DATA expk<>+152(SB)/8, $0x3fe62e42fee00000
DATA expk<>+160(SB)/8, $0x3dea39ef35793c76 // ln 2, low part
DATA expk<>+168(SB)/8, $0x3dea39ef35793c76
DATA expk<>+176(SB)/8, $0x3dea39ef35793c76
DATA expk<>+184(SB)/8, $0x3dea39ef35793c76
DATA expk<>+192(SB)/8, $0x3ff0000000000000 // 1
DATA expk<>+200(SB)/8, $0x3ff0000000000000
DATA expk<>+208(SB)/8, $0x3ff0000000000000
DATA expk<>+216(SB)/8, $0x3ff0000000000000
DATA expk<>+224(SB)/8, $0x3de6124613a86d09 // 1/13!
DATA expk<>+232(SB)/8, $0x3de6124613a86d09
DATA expk<>+240(SB)/8, $0x3de6124613a86d09
DATA expk<>+248(SB)/8, $0x3de6124613a86d09
DATA expk<>+256(SB)/8, $0x3e21eed8eff8d898 // 1/12!
DATA expk<>+264(SB)/8, $0x3e21eed8eff8d898
DATA expk<>+272(SB)/8, $0x3e21eed8eff8d898
DATA expk<>+280(SB)/8, $0x3e21eed8eff8d898
DATA expk<>+288(SB)/8, $0x3e5ae64567f544e4 // 1/11!
DATA expk<>+296(SB)/8, $0x3e5ae64567f544e4
DATA expk<>+304(SB)/8, $0x3e5ae64567f544e4
DATA expk<>+312(SB)/8, $0x3e5ae64567f544e4
DATA expk<>+320(SB)/8, $0x3e927e4fb7789f5c // 1/10!
DATA expk<>+328(SB)/8, $0x3e927e4fb7789f5c
DATA expk<>+336(SB)/8, $0x3e927e4fb7789f5c
DATA expk<>+344(SB)/8, $0x3e927e4fb7789f5c
DATA expk<>+352(SB)/8, $0x3ec71de3a556c734 // 1/9!
DATA expk<>+360(SB)/8, $0x3ec71de3a556c734
DATA expk<>+368(SB)/8, $0x3ec71de3a556c734
DATA expk<>+376(SB)/8, $0x3ec71de3a556c734
DATA expk<>+384(SB)/8, $0x3efa01a01a01a01a // 1/8!
DATA expk<>+392(SB)/8, $0x3efa01a01a01a01a
DATA expk<>+400(SB)/8, $0x3efa01a01a01a01a
DATA expk<>+408(SB)/8, $0x3efa01a01a01a01a
DATA expk<>+416(SB)/8, $0x3f2a01a01a01a01a // 1/7!
DATA expk<>+424(SB)/8, $0x3f2a01a01a01a01a
DATA expk<>+432(SB)/8, $0x3f2a01a01a01a01a
DATA expk<>+440(SB)/8, $0x3f2a01a01a01a01a
DATA expk<>+448(SB)/8, $0x3f56c16c16c16c17 // 1/6!
DATA expk<>+456(SB)/8, $0x3f56c16c16c16c17
DATA expk<>+464(SB)/8, $0x3f56c16c16c16c17
DATA expk<>+472(SB)/8, $0x3f56c16c16c16c17
DATA expk<>+480(SB)/8, $0x3f81111111111111 // 1/5!
DATA expk<>+488(SB)/8, $0x3f81111111111111
DATA expk<>+496(SB)/8, $0x3f81111111111111
DATA expk<>+504(SB)/8, $0x3f81111111111111
DATA expk<>+512(SB)/8, $0x3fa5555555555555 // 1/4!
DATA expk<>+520(SB)/8, $0x3fa5555555555555
DATA expk<>+528(SB)/8, $0x3fa5555555555555
DATA expk<>+536(SB)/8, $0x3fa5555555555555
DATA expk<>+544(SB)/8, $0x3fc5555555555555 // 1/3!
DATA expk<>+552(SB)/8, $0x3fc5555555555555
DATA expk<>+560(SB)/8, $0x3fc5555555555555
DATA expk<>+568(SB)/8, $0x3fc5555555555555
DATA expk<>+576(SB)/8, $0x3fe0000000000000 // 1/2
DATA expk<>+584(SB)/8, $0x3fe0000000000000
DATA expk<>+592(SB)/8, $0x3fe0000000000000
DATA expk<>+600(SB)/8, $0x3fe0000000000000
GLOBL expk<>(SB), RODATA|NOPTR, $608

// func expAVX2(n int, x, y *float64)
// y[i] = exp64(x[i]) for i < n (n > 0, a multiple of 4): the operations of exp64 on four
// lanes, in the same order.
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	SHRQ $2, CX
	VMOVUPD expk<>+96(SB), Y14
	VMOVUPD expk<>+192(SB), Y15

loop:
	VMOVUPD (SI), Y0                     // x
	VMOVUPD expk<>+32(SB), Y1
	VMINPD Y0, Y1, Y1                    // x = 709 < x ? 709 : x (a NaN x stays)
	VMOVAPD Y14, Y3
	VFMADD231PD expk<>+64(SB), Y1, Y3   // t = x log2e + magic
	VSUBPD Y14, Y3, Y4                   // n = t - magic
	VFNMADD231PD expk<>+128(SB), Y4, Y1 // r = x - n ln2hi
	VFNMADD231PD expk<>+160(SB), Y4, Y1  // r -= n ln2lo
	VMOVUPD expk<>+224(SB), Y5             // p = 1/13!
	VFMADD213PD expk<>+256(SB), Y1, Y5
	VFMADD213PD expk<>+288(SB), Y1, Y5
	VFMADD213PD expk<>+320(SB), Y1, Y5
	VFMADD213PD expk<>+352(SB), Y1, Y5
	VFMADD213PD expk<>+384(SB), Y1, Y5
	VFMADD213PD expk<>+416(SB), Y1, Y5
	VFMADD213PD expk<>+448(SB), Y1, Y5
	VFMADD213PD expk<>+480(SB), Y1, Y5
	VFMADD213PD expk<>+512(SB), Y1, Y5
	VFMADD213PD expk<>+544(SB), Y1, Y5
	VFMADD213PD expk<>+576(SB), Y1, Y5
	VFMADD213PD Y15, Y1, Y5
	VFMADD213PD Y15, Y1, Y5
	VPSLLQ $52, Y3, Y6
	VPADDQ Y15, Y6, Y6                   // 2^n
	VMULPD Y6, Y5, Y5                    // p 2^n
	VMOVUPD expk<>+0(SB), Y7
	VCMPPD $1, Y7, Y0, Y7                // x < -708
	VANDNPD Y5, Y7, Y5                   // then 0
	VMOVUPD Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET
