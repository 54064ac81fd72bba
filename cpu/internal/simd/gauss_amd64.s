//go:build !purego

#include "textflag.h"

// Constants of gaussianBlock and BoxMuller (philox.go) as 64-bit patterns, each repeated in
// four lanes (AVX2 has no broadcast memory operand). Generated from the Go constants.
// 0: hi 0x43300000 (upper dwords of 2^52)
DATA bmk<>+0(SB)/8, $0x4330000000000000
DATA bmk<>+8(SB)/8, $0x4330000000000000
DATA bmk<>+16(SB)/8, $0x4330000000000000
DATA bmk<>+24(SB)/8, $0x4330000000000000
// 32: 2^52
DATA bmk<>+32(SB)/8, $0x4330000000000000
DATA bmk<>+40(SB)/8, $0x4330000000000000
DATA bmk<>+48(SB)/8, $0x4330000000000000
DATA bmk<>+56(SB)/8, $0x4330000000000000
// 64: 1
DATA bmk<>+64(SB)/8, $0x3ff0000000000000
DATA bmk<>+72(SB)/8, $0x3ff0000000000000
DATA bmk<>+80(SB)/8, $0x3ff0000000000000
DATA bmk<>+88(SB)/8, $0x3ff0000000000000
// 96: mantissa mask
DATA bmk<>+96(SB)/8, $0x000fffffffffffff
DATA bmk<>+104(SB)/8, $0x000fffffffffffff
DATA bmk<>+112(SB)/8, $0x000fffffffffffff
DATA bmk<>+120(SB)/8, $0x000fffffffffffff
// 128: exponent of 1
DATA bmk<>+128(SB)/8, $0x3ff0000000000000
DATA bmk<>+136(SB)/8, $0x3ff0000000000000
DATA bmk<>+144(SB)/8, $0x3ff0000000000000
DATA bmk<>+152(SB)/8, $0x3ff0000000000000
// 160: sqrt 2
DATA bmk<>+160(SB)/8, $0x3ff6a09e667f3bcd
DATA bmk<>+168(SB)/8, $0x3ff6a09e667f3bcd
DATA bmk<>+176(SB)/8, $0x3ff6a09e667f3bcd
DATA bmk<>+184(SB)/8, $0x3ff6a09e667f3bcd
// 192: 1/2
DATA bmk<>+192(SB)/8, $0x3fe0000000000000
DATA bmk<>+200(SB)/8, $0x3fe0000000000000
DATA bmk<>+208(SB)/8, $0x3fe0000000000000
DATA bmk<>+216(SB)/8, $0x3fe0000000000000
// 224: 1055 (biased exponent of 2^32)
DATA bmk<>+224(SB)/8, $0x40907c0000000000
DATA bmk<>+232(SB)/8, $0x40907c0000000000
DATA bmk<>+240(SB)/8, $0x40907c0000000000
DATA bmk<>+248(SB)/8, $0x40907c0000000000
// 256: 2
DATA bmk<>+256(SB)/8, $0x4000000000000000
DATA bmk<>+264(SB)/8, $0x4000000000000000
DATA bmk<>+272(SB)/8, $0x4000000000000000
DATA bmk<>+280(SB)/8, $0x4000000000000000
// 288: 1/21
DATA bmk<>+288(SB)/8, $0x3fa8618618618618
DATA bmk<>+296(SB)/8, $0x3fa8618618618618
DATA bmk<>+304(SB)/8, $0x3fa8618618618618
DATA bmk<>+312(SB)/8, $0x3fa8618618618618
// 320: 1/19
DATA bmk<>+320(SB)/8, $0x3faaf286bca1af28
DATA bmk<>+328(SB)/8, $0x3faaf286bca1af28
DATA bmk<>+336(SB)/8, $0x3faaf286bca1af28
DATA bmk<>+344(SB)/8, $0x3faaf286bca1af28
// 352: 1/17
DATA bmk<>+352(SB)/8, $0x3fae1e1e1e1e1e1e
DATA bmk<>+360(SB)/8, $0x3fae1e1e1e1e1e1e
DATA bmk<>+368(SB)/8, $0x3fae1e1e1e1e1e1e
DATA bmk<>+376(SB)/8, $0x3fae1e1e1e1e1e1e
// 384: 1/15
DATA bmk<>+384(SB)/8, $0x3fb1111111111111
DATA bmk<>+392(SB)/8, $0x3fb1111111111111
DATA bmk<>+400(SB)/8, $0x3fb1111111111111
DATA bmk<>+408(SB)/8, $0x3fb1111111111111
// 416: 1/13
DATA bmk<>+416(SB)/8, $0x3fb3b13b13b13b14
DATA bmk<>+424(SB)/8, $0x3fb3b13b13b13b14
DATA bmk<>+432(SB)/8, $0x3fb3b13b13b13b14
DATA bmk<>+440(SB)/8, $0x3fb3b13b13b13b14
// 448: 1/11
DATA bmk<>+448(SB)/8, $0x3fb745d1745d1746
DATA bmk<>+456(SB)/8, $0x3fb745d1745d1746
DATA bmk<>+464(SB)/8, $0x3fb745d1745d1746
DATA bmk<>+472(SB)/8, $0x3fb745d1745d1746
// 480: 1/9
DATA bmk<>+480(SB)/8, $0x3fbc71c71c71c71c
DATA bmk<>+488(SB)/8, $0x3fbc71c71c71c71c
DATA bmk<>+496(SB)/8, $0x3fbc71c71c71c71c
DATA bmk<>+504(SB)/8, $0x3fbc71c71c71c71c
// 512: 1/7
DATA bmk<>+512(SB)/8, $0x3fc2492492492492
DATA bmk<>+520(SB)/8, $0x3fc2492492492492
DATA bmk<>+528(SB)/8, $0x3fc2492492492492
DATA bmk<>+536(SB)/8, $0x3fc2492492492492
// 544: 1/5
DATA bmk<>+544(SB)/8, $0x3fc999999999999a
DATA bmk<>+552(SB)/8, $0x3fc999999999999a
DATA bmk<>+560(SB)/8, $0x3fc999999999999a
DATA bmk<>+568(SB)/8, $0x3fc999999999999a
// 576: 1/3
DATA bmk<>+576(SB)/8, $0x3fd5555555555555
DATA bmk<>+584(SB)/8, $0x3fd5555555555555
DATA bmk<>+592(SB)/8, $0x3fd5555555555555
DATA bmk<>+600(SB)/8, $0x3fd5555555555555
// 608: ln 2 low
DATA bmk<>+608(SB)/8, $0x3dea39ef35793c76
DATA bmk<>+616(SB)/8, $0x3dea39ef35793c76
DATA bmk<>+624(SB)/8, $0x3dea39ef35793c76
DATA bmk<>+632(SB)/8, $0x3dea39ef35793c76
// 640: ln 2 high
DATA bmk<>+640(SB)/8, $0x3fe62e42fee00000
DATA bmk<>+648(SB)/8, $0x3fe62e42fee00000
DATA bmk<>+656(SB)/8, $0x3fe62e42fee00000
DATA bmk<>+664(SB)/8, $0x3fe62e42fee00000
// 672: -2
DATA bmk<>+672(SB)/8, $0xc000000000000000
DATA bmk<>+680(SB)/8, $0xc000000000000000
DATA bmk<>+688(SB)/8, $0xc000000000000000
DATA bmk<>+696(SB)/8, $0xc000000000000000
// 704: 2^29 (dwords)
DATA bmk<>+704(SB)/8, $0x0000000020000000
DATA bmk<>+712(SB)/8, $0x0000000020000000
DATA bmk<>+720(SB)/8, $0x0000000020000000
DATA bmk<>+728(SB)/8, $0x0000000020000000
// 736: 2^31 (dwords)
DATA bmk<>+736(SB)/8, $0x0000000080000000
DATA bmk<>+744(SB)/8, $0x0000000080000000
DATA bmk<>+752(SB)/8, $0x0000000080000000
DATA bmk<>+760(SB)/8, $0x0000000080000000
// 768: 2^52 + 2^31
DATA bmk<>+768(SB)/8, $0x4330000080000000
DATA bmk<>+776(SB)/8, $0x4330000080000000
DATA bmk<>+784(SB)/8, $0x4330000080000000
DATA bmk<>+792(SB)/8, $0x4330000080000000
// 800: 2 pi 2^-32
DATA bmk<>+800(SB)/8, $0x3e1921fb54442d18
DATA bmk<>+808(SB)/8, $0x3e1921fb54442d18
DATA bmk<>+816(SB)/8, $0x3e1921fb54442d18
DATA bmk<>+824(SB)/8, $0x3e1921fb54442d18
// 832: 1/17!
DATA bmk<>+832(SB)/8, $0x3ce952c77030ad4a
DATA bmk<>+840(SB)/8, $0x3ce952c77030ad4a
DATA bmk<>+848(SB)/8, $0x3ce952c77030ad4a
DATA bmk<>+856(SB)/8, $0x3ce952c77030ad4a
// 864: -1/15!
DATA bmk<>+864(SB)/8, $0xbd6ae7f3e733b81f
DATA bmk<>+872(SB)/8, $0xbd6ae7f3e733b81f
DATA bmk<>+880(SB)/8, $0xbd6ae7f3e733b81f
DATA bmk<>+888(SB)/8, $0xbd6ae7f3e733b81f
// 896: 1/13!
DATA bmk<>+896(SB)/8, $0x3de6124613a86d09
DATA bmk<>+904(SB)/8, $0x3de6124613a86d09
DATA bmk<>+912(SB)/8, $0x3de6124613a86d09
DATA bmk<>+920(SB)/8, $0x3de6124613a86d09
// 928: -1/11!
DATA bmk<>+928(SB)/8, $0xbe5ae64567f544e4
DATA bmk<>+936(SB)/8, $0xbe5ae64567f544e4
DATA bmk<>+944(SB)/8, $0xbe5ae64567f544e4
DATA bmk<>+952(SB)/8, $0xbe5ae64567f544e4
// 960: 1/9!
DATA bmk<>+960(SB)/8, $0x3ec71de3a556c734
DATA bmk<>+968(SB)/8, $0x3ec71de3a556c734
DATA bmk<>+976(SB)/8, $0x3ec71de3a556c734
DATA bmk<>+984(SB)/8, $0x3ec71de3a556c734
// 992: -1/7!
DATA bmk<>+992(SB)/8, $0xbf2a01a01a01a01a
DATA bmk<>+1000(SB)/8, $0xbf2a01a01a01a01a
DATA bmk<>+1008(SB)/8, $0xbf2a01a01a01a01a
DATA bmk<>+1016(SB)/8, $0xbf2a01a01a01a01a
// 1024: 1/5!
DATA bmk<>+1024(SB)/8, $0x3f81111111111111
DATA bmk<>+1032(SB)/8, $0x3f81111111111111
DATA bmk<>+1040(SB)/8, $0x3f81111111111111
DATA bmk<>+1048(SB)/8, $0x3f81111111111111
// 1056: -1/3!
DATA bmk<>+1056(SB)/8, $0xbfc5555555555555
DATA bmk<>+1064(SB)/8, $0xbfc5555555555555
DATA bmk<>+1072(SB)/8, $0xbfc5555555555555
DATA bmk<>+1080(SB)/8, $0xbfc5555555555555
// 1088: -1/18!
DATA bmk<>+1088(SB)/8, $0xbca6827863b97d97
DATA bmk<>+1096(SB)/8, $0xbca6827863b97d97
DATA bmk<>+1104(SB)/8, $0xbca6827863b97d97
DATA bmk<>+1112(SB)/8, $0xbca6827863b97d97
// 1120: 1/16!
DATA bmk<>+1120(SB)/8, $0x3d2ae7f3e733b81f
DATA bmk<>+1128(SB)/8, $0x3d2ae7f3e733b81f
DATA bmk<>+1136(SB)/8, $0x3d2ae7f3e733b81f
DATA bmk<>+1144(SB)/8, $0x3d2ae7f3e733b81f
// 1152: -1/14!
DATA bmk<>+1152(SB)/8, $0xbda93974a8c07c9d
DATA bmk<>+1160(SB)/8, $0xbda93974a8c07c9d
DATA bmk<>+1168(SB)/8, $0xbda93974a8c07c9d
DATA bmk<>+1176(SB)/8, $0xbda93974a8c07c9d
// 1184: 1/12!
DATA bmk<>+1184(SB)/8, $0x3e21eed8eff8d898
DATA bmk<>+1192(SB)/8, $0x3e21eed8eff8d898
DATA bmk<>+1200(SB)/8, $0x3e21eed8eff8d898
DATA bmk<>+1208(SB)/8, $0x3e21eed8eff8d898
// 1216: -1/10!
DATA bmk<>+1216(SB)/8, $0xbe927e4fb7789f5c
DATA bmk<>+1224(SB)/8, $0xbe927e4fb7789f5c
DATA bmk<>+1232(SB)/8, $0xbe927e4fb7789f5c
DATA bmk<>+1240(SB)/8, $0xbe927e4fb7789f5c
// 1248: 1/8!
DATA bmk<>+1248(SB)/8, $0x3efa01a01a01a01a
DATA bmk<>+1256(SB)/8, $0x3efa01a01a01a01a
DATA bmk<>+1264(SB)/8, $0x3efa01a01a01a01a
DATA bmk<>+1272(SB)/8, $0x3efa01a01a01a01a
// 1280: -1/6!
DATA bmk<>+1280(SB)/8, $0xbf56c16c16c16c17
DATA bmk<>+1288(SB)/8, $0xbf56c16c16c16c17
DATA bmk<>+1296(SB)/8, $0xbf56c16c16c16c17
DATA bmk<>+1304(SB)/8, $0xbf56c16c16c16c17
// 1312: 1/4!
DATA bmk<>+1312(SB)/8, $0x3fa5555555555555
DATA bmk<>+1320(SB)/8, $0x3fa5555555555555
DATA bmk<>+1328(SB)/8, $0x3fa5555555555555
DATA bmk<>+1336(SB)/8, $0x3fa5555555555555
// 1344: -1/2
DATA bmk<>+1344(SB)/8, $0xbfe0000000000000
DATA bmk<>+1352(SB)/8, $0xbfe0000000000000
DATA bmk<>+1360(SB)/8, $0xbfe0000000000000
DATA bmk<>+1368(SB)/8, $0xbfe0000000000000
// 1376: sign bit
DATA bmk<>+1376(SB)/8, $0x8000000000000000
DATA bmk<>+1384(SB)/8, $0x8000000000000000
DATA bmk<>+1392(SB)/8, $0x8000000000000000
DATA bmk<>+1400(SB)/8, $0x8000000000000000
// 1408: Philox M0
DATA bmk<>+1408(SB)/8, $0x00000000d2511f53
DATA bmk<>+1416(SB)/8, $0x00000000d2511f53
DATA bmk<>+1424(SB)/8, $0x00000000d2511f53
DATA bmk<>+1432(SB)/8, $0x00000000d2511f53
// 1440: Philox M1
DATA bmk<>+1440(SB)/8, $0x00000000cd9e8d57
DATA bmk<>+1448(SB)/8, $0x00000000cd9e8d57
DATA bmk<>+1456(SB)/8, $0x00000000cd9e8d57
DATA bmk<>+1464(SB)/8, $0x00000000cd9e8d57
// 1472: Philox W0
DATA bmk<>+1472(SB)/8, $0x000000009e3779b9
DATA bmk<>+1480(SB)/8, $0x000000009e3779b9
DATA bmk<>+1488(SB)/8, $0x000000009e3779b9
DATA bmk<>+1496(SB)/8, $0x000000009e3779b9
// 1504: Philox W1
DATA bmk<>+1504(SB)/8, $0x00000000bb67ae85
DATA bmk<>+1512(SB)/8, $0x00000000bb67ae85
DATA bmk<>+1520(SB)/8, $0x00000000bb67ae85
DATA bmk<>+1528(SB)/8, $0x00000000bb67ae85
// 1536: 4 (counter step)
DATA bmk<>+1536(SB)/8, $0x0000000000000004
DATA bmk<>+1544(SB)/8, $0x0000000000000004
DATA bmk<>+1552(SB)/8, $0x0000000000000004
DATA bmk<>+1560(SB)/8, $0x0000000000000004
// 1568: domain noise << 24
DATA bmk<>+1568(SB)/8, $0x0000000001000000
DATA bmk<>+1576(SB)/8, $0x0000000001000000
DATA bmk<>+1584(SB)/8, $0x0000000001000000
DATA bmk<>+1592(SB)/8, $0x0000000001000000
// 1600: low 32 bits (AVX-512 form, broadcast)
DATA bmk<>+1600(SB)/8, $0x00000000ffffffff
// 1608: integer 1 (broadcast)
DATA bmk<>+1608(SB)/8, $0x0000000000000001
// 1616: 8, the AVX-512 counter step (broadcast)
DATA bmk<>+1616(SB)/8, $0x0000000000000008
// 1624: 0, 1, ..., 7: counter offsets of the eight lanes
DATA bmk<>+1624(SB)/8, $0x0000000000000000
DATA bmk<>+1632(SB)/8, $0x0000000000000001
DATA bmk<>+1640(SB)/8, $0x0000000000000002
DATA bmk<>+1648(SB)/8, $0x0000000000000003
DATA bmk<>+1656(SB)/8, $0x0000000000000004
DATA bmk<>+1664(SB)/8, $0x0000000000000005
DATA bmk<>+1672(SB)/8, $0x0000000000000006
DATA bmk<>+1680(SB)/8, $0x0000000000000007
GLOBL bmk<>(SB), RODATA|NOPTR, $1688

// One Philox4x32 round on four counters, one per 64-bit lane (the 32-bit words in the low
// halves; the high halves carry garbage that VPMULUDQ and the shifts never let down).
// c0..c3 in Y0..Y3, keys in Y4, Y5.
#define PHILOX_ROUND \
	VPMULUDQ bmk<>+1408(SB), Y0, Y6 \ // p0 = M0 c0
	VPMULUDQ bmk<>+1440(SB), Y2, Y7 \ // p1 = M1 c2
	VPSRLQ   $32, Y7, Y8 \
	VPXOR    Y1, Y8, Y8 \
	VPXOR    Y4, Y8, Y0 \             // c0 = hi(p1) ^ c1 ^ k0
	VPSRLQ   $32, Y6, Y8 \
	VPXOR    Y3, Y8, Y8 \
	VPXOR    Y5, Y8, Y2 \             // c2 = hi(p0) ^ c3 ^ k1
	VMOVDQA  Y7, Y1 \                 // c1 = lo(p1)
	VMOVDQA  Y6, Y3 \                 // c3 = lo(p0)
	VPADDD   bmk<>+1472(SB), Y4, Y4 \ // k0 += W0
	VPADDD   bmk<>+1504(SB), Y5, Y5   // k1 += W1

// BOX_MULLER turns the words a (low halves of A) and b (low halves of B) of four lanes into
// the float32 normals rad cos in XA and rad sin in XB, with BoxMuller's operations in its
// order. Temporaries Y4..Y12.
#define BOX_MULLER(A, B, XA, XB) \
	VPBLENDD    $0xAA, bmk<>+0(SB), A, A \    // bits 2^52 + a
	VSUBPD      bmk<>+32(SB), A, A \          // float64(a)
	VADDPD      bmk<>+64(SB), A, A \          // v = a + 1
	VPSRLQ      $52, A, Y4 \                  // biased exponent
	VPAND       bmk<>+96(SB), A, Y5 \
	VPOR        bmk<>+128(SB), Y5, Y5 \       // m in [1, 2)
	VCMPPD      $0x1E, bmk<>+160(SB), Y5, Y6 \ // m > sqrt 2
	VMULPD      bmk<>+192(SB), Y5, Y7 \
	VBLENDVPD   Y6, Y7, Y5, Y5 \              // then m / 2
	VPOR        bmk<>+0(SB), Y4, Y4 \
	VSUBPD      bmk<>+32(SB), Y4, Y4 \        // float64(biased exponent)
	VSUBPD      bmk<>+224(SB), Y4, Y4 \       // e - 32
	VANDPD      bmk<>+64(SB), Y6, Y7 \
	VADDPD      Y7, Y4, Y4 \                  // k = e - 32 (+1 where m was halved)
	VSUBPD      bmk<>+64(SB), Y5, Y5 \        // f = m - 1
	VADDPD      bmk<>+256(SB), Y5, Y7 \       // 2 + f
	VDIVPD      Y7, Y5, Y5 \                  // s = f / (2 + f)
	VMULPD      Y5, Y5, Y7 \                  // z = s^2
	VMOVUPD     bmk<>+288(SB), Y8 \
	VFMADD213PD bmk<>+320(SB), Y7, Y8 \
	VFMADD213PD bmk<>+352(SB), Y7, Y8 \
	VFMADD213PD bmk<>+384(SB), Y7, Y8 \
	VFMADD213PD bmk<>+416(SB), Y7, Y8 \
	VFMADD213PD bmk<>+448(SB), Y7, Y8 \
	VFMADD213PD bmk<>+480(SB), Y7, Y8 \
	VFMADD213PD bmk<>+512(SB), Y7, Y8 \
	VFMADD213PD bmk<>+544(SB), Y7, Y8 \
	VFMADD213PD bmk<>+576(SB), Y7, Y8 \
	VFMADD213PD bmk<>+64(SB), Y7, Y8 \        // p
	VADDPD      Y5, Y5, Y5 \
	VMULPD      Y8, Y5, Y5 \                  // 2 s p
	VFMADD231PD bmk<>+608(SB), Y4, Y5 \
	VFMADD231PD bmk<>+640(SB), Y4, Y5 \       // ln u
	VMULPD      bmk<>+672(SB), Y5, Y5 \
	VSQRTPD     Y5, Y5 \                      // rad
	VPADDD      bmk<>+704(SB), B, Y4 \
	VPSRLD      $30, Y4, Y4 \                 // q = (b + 2^29) >> 30, 32-bit
	VPSLLD      $30, Y4, Y6 \
	VPSUBD      Y6, B, Y6 \                   // r = b - q 2^30 as int32
	VPXOR       bmk<>+736(SB), Y6, Y6 \
	VPBLENDD    $0xAA, bmk<>+0(SB), Y6, Y6 \  // bits 2^52 + r + 2^31
	VSUBPD      bmk<>+768(SB), Y6, Y6 \       // float64(r)
	VMULPD      bmk<>+800(SB), Y6, Y6 \       // t
	VMULPD      Y6, Y6, Y7 \                  // t^2
	VMOVUPD     bmk<>+832(SB), Y8 \
	VFMADD213PD bmk<>+864(SB), Y7, Y8 \
	VFMADD213PD bmk<>+896(SB), Y7, Y8 \
	VFMADD213PD bmk<>+928(SB), Y7, Y8 \
	VFMADD213PD bmk<>+960(SB), Y7, Y8 \
	VFMADD213PD bmk<>+992(SB), Y7, Y8 \
	VFMADD213PD bmk<>+1024(SB), Y7, Y8 \
	VFMADD213PD bmk<>+1056(SB), Y7, Y8 \
	VMULPD      Y7, Y6, Y9 \                  // t^3
	VFMADD213PD Y6, Y9, Y8 \                  // sin t
	VMOVUPD     bmk<>+1088(SB), Y9 \
	VFMADD213PD bmk<>+1120(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1152(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1184(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1216(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1248(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1280(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1312(SB), Y7, Y9 \
	VFMADD213PD bmk<>+1344(SB), Y7, Y9 \
	VFMADD213PD bmk<>+64(SB), Y7, Y9 \        // cos t
	VPSLLQ      $63, Y4, Y10 \                // odd quadrant: swap
	VBLENDVPD   Y10, Y9, Y8, Y11 \            // sin of the angle, up to sign
	VBLENDVPD   Y10, Y8, Y9, Y12 \            // cos, up to sign
	VPSLLQ      $62, Y4, Y10 \
	VPAND       bmk<>+1376(SB), Y10, Y10 \
	VPXOR       Y10, Y11, Y11 \               // negated in quadrants 2, 3
	VPSRLQ      $1, Y4, Y10 \
	VPXOR       Y4, Y10, Y10 \
	VPSLLQ      $63, Y10, Y10 \
	VPXOR       Y10, Y12, Y12 \               // negated in quadrants 1, 2
	VMULPD      Y12, Y5, Y12 \
	VMULPD      Y11, Y5, Y11 \
	VCVTPD2PSY  Y12, XA \
	VCVTPD2PSY  Y11, XB

// func gaussAVX2(quads int, z *float32, k0, k1, j0, round, stream uint32)
// z[16i .. 16i+15] = the float32 normals of counters j0 + 4i .. j0 + 4i + 3 of the noise stream
// (key (k0, k1), round, stream), for i < quads: gaussianBlock's values, four counters at a time.
TEXT ·gaussAVX2(SB), NOSPLIT, $128-36
	MOVQ         quads+0(FP), CX
	MOVQ         z+8(FP), DI
	MOVL         k0+16(FP), AX
	MOVQ         AX, X0
	VPBROADCASTQ X0, Y0
	VMOVDQU      Y0, 0(SP)
	MOVL         k1+20(FP), AX
	MOVQ         AX, X0
	VPBROADCASTQ X0, Y0
	VMOVDQU      Y0, 32(SP)
	MOVL         round+28(FP), AX
	MOVQ         AX, X0
	VPBROADCASTQ X0, Y0
	VMOVDQU      Y0, 64(SP)
	MOVL         stream+32(FP), AX
	MOVQ         AX, X0
	VPBROADCASTQ X0, Y0
	VMOVDQU      Y0, 96(SP)
	// Y15 = (j0, j0+1, j0+2, j0+3) in the low halves
	MOVL         j0+24(FP), AX
	MOVQ         AX, X15
	VPBROADCASTQ X15, Y15
	VPXOR        Y14, Y14, Y14
	MOVQ         $1, AX
	MOVQ         AX, X13
	VPSLLDQ      $8, X13, X13          // (0, 1)
	MOVQ         $2, AX
	MOVQ         AX, X12
	MOVQ         $3, AX
	MOVQ         AX, X11
	VPUNPCKLQDQ  X11, X12, X12         // (2, 3)
	VINSERTI128  $1, X12, Y13, Y13     // (0, 1, 2, 3)
	VPADDQ       Y13, Y15, Y15

loop:
	VMOVDQA  Y15, Y0
	VMOVDQU  64(SP), Y1
	VMOVDQU  96(SP), Y2
	VMOVDQU  bmk<>+1568(SB), Y3
	VMOVDQU  0(SP), Y4
	VMOVDQU  32(SP), Y5
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	PHILOX_ROUND
	BOX_MULLER(Y0, Y1, X0, X1)
	BOX_MULLER(Y2, Y3, X2, X3)
	// Counter i's four values are (X0[i], X1[i], X2[i], X3[i]): transpose.
	VUNPCKLPS X1, X0, X4
	VUNPCKHPS X1, X0, X5
	VUNPCKLPS X3, X2, X6
	VUNPCKHPS X3, X2, X7
	VMOVLHPS  X6, X4, X0
	VMOVHLPS  X4, X6, X1
	VMOVLHPS  X7, X5, X2
	VMOVHLPS  X5, X7, X3
	VMOVUPS   X0, 0(DI)
	VMOVUPS   X1, 16(DI)
	VMOVUPS   X2, 32(DI)
	VMOVUPS   X3, 48(DI)
	VPADDQ    bmk<>+1536(SB), Y15, Y15
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
	RET

// The AVX-512 form: eight counters at a time, the same operations as gaussAVX2 lane by lane
// (masks instead of blends, broadcast constants).
#define PHILOX_ROUND_Z \
	VPMULUDQ.BCST bmk<>+1408(SB), Z0, Z6 \
	VPMULUDQ.BCST bmk<>+1440(SB), Z2, Z7 \
	VPSRLQ   $32, Z7, Z8 \
	VPXORQ   Z1, Z8, Z8 \
	VPXORQ   Z4, Z8, Z0 \
	VPSRLQ   $32, Z6, Z8 \
	VPXORQ   Z3, Z8, Z8 \
	VPXORQ   Z5, Z8, Z2 \
	VMOVDQA64 Z7, Z1 \
	VMOVDQA64 Z6, Z3 \
	VPADDD.BCST bmk<>+1472(SB), Z4, Z4 \
	VPADDD.BCST bmk<>+1504(SB), Z5, Z5

#define BOX_MULLER_Z(A, B, YA, YB) \
	VPANDQ.BCST  bmk<>+1600(SB), A, A \
	VPORQ.BCST   bmk<>+0(SB), A, A \
	VSUBPD.BCST  bmk<>+32(SB), A, A \
	VADDPD.BCST  bmk<>+64(SB), A, A \
	VPSRLQ       $52, A, Z4 \
	VPANDQ.BCST  bmk<>+96(SB), A, Z5 \
	VPORQ.BCST   bmk<>+128(SB), Z5, Z5 \
	VCMPPD.BCST  $0x1E, bmk<>+160(SB), Z5, K1 \
	VMULPD.BCST  bmk<>+192(SB), Z5, K1, Z5 \
	VPORQ.BCST   bmk<>+0(SB), Z4, Z4 \
	VSUBPD.BCST  bmk<>+32(SB), Z4, Z4 \
	VSUBPD.BCST  bmk<>+224(SB), Z4, Z4 \
	VADDPD.BCST  bmk<>+64(SB), Z4, K1, Z4 \
	VSUBPD.BCST  bmk<>+64(SB), Z5, Z5 \
	VADDPD.BCST  bmk<>+256(SB), Z5, Z7 \
	VDIVPD       Z7, Z5, Z5 \
	VMULPD       Z5, Z5, Z7 \
	VBROADCASTSD bmk<>+288(SB), Z8 \
	VFMADD213PD.BCST bmk<>+320(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+352(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+384(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+416(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+448(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+480(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+512(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+544(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+576(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+64(SB), Z7, Z8 \
	VADDPD       Z5, Z5, Z5 \
	VMULPD       Z8, Z5, Z5 \
	VFMADD231PD.BCST bmk<>+608(SB), Z4, Z5 \
	VFMADD231PD.BCST bmk<>+640(SB), Z4, Z5 \
	VMULPD.BCST  bmk<>+672(SB), Z5, Z5 \
	VSQRTPD      Z5, Z5 \
	VPADDD.BCST  bmk<>+704(SB), B, Z4 \
	VPSRLD       $30, Z4, Z4 \
	VPSLLD       $30, Z4, Z6 \
	VPSUBD       Z6, B, Z6 \
	VPXORD.BCST  bmk<>+736(SB), Z6, Z6 \
	VPANDQ.BCST  bmk<>+1600(SB), Z6, Z6 \
	VPORQ.BCST   bmk<>+0(SB), Z6, Z6 \
	VSUBPD.BCST  bmk<>+768(SB), Z6, Z6 \
	VMULPD.BCST  bmk<>+800(SB), Z6, Z6 \
	VMULPD       Z6, Z6, Z7 \
	VBROADCASTSD bmk<>+832(SB), Z8 \
	VFMADD213PD.BCST bmk<>+864(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+896(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+928(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+960(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+992(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+1024(SB), Z7, Z8 \
	VFMADD213PD.BCST bmk<>+1056(SB), Z7, Z8 \
	VMULPD       Z7, Z6, Z9 \
	VFMADD213PD  Z6, Z9, Z8 \
	VBROADCASTSD bmk<>+1088(SB), Z9 \
	VFMADD213PD.BCST bmk<>+1120(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1152(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1184(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1216(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1248(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1280(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1312(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+1344(SB), Z7, Z9 \
	VFMADD213PD.BCST bmk<>+64(SB), Z7, Z9 \
	VPTESTMQ.BCST bmk<>+1608(SB), Z4, K2 \
	VBLENDMPD    Z9, Z8, K2, Z10 \
	VBLENDMPD    Z8, Z9, K2, Z11 \
	VPSLLQ       $62, Z4, Z12 \
	VPANDQ.BCST  bmk<>+1376(SB), Z12, Z12 \
	VPXORQ       Z12, Z10, Z10 \
	VPSRLQ       $1, Z4, Z12 \
	VPXORQ       Z4, Z12, Z12 \
	VPSLLQ       $63, Z12, Z12 \
	VPXORQ       Z12, Z11, Z11 \
	VMULPD       Z11, Z5, Z11 \
	VMULPD       Z10, Z5, Z10 \
	VCVTPD2PS    Z11, YA \
	VCVTPD2PS    Z10, YB

// func gaussAVX512(octs int, z *float32, k0, k1, j0, round, stream uint32)
// z[32i .. 32i+31] = the float32 normals of counters j0 + 8i .. j0 + 8i + 7: gaussAVX2's values.
TEXT ·gaussAVX512(SB), NOSPLIT, $256-36
	MOVQ         octs+0(FP), CX
	MOVQ         z+8(FP), DI
	MOVL         k0+16(FP), AX
	VPBROADCASTQ AX, Z0
	VMOVDQU64    Z0, 0(SP)
	MOVL         k1+20(FP), AX
	VPBROADCASTQ AX, Z0
	VMOVDQU64    Z0, 64(SP)
	MOVL         round+28(FP), AX
	VPBROADCASTQ AX, Z0
	VMOVDQU64    Z0, 128(SP)
	MOVL         stream+32(FP), AX
	VPBROADCASTQ AX, Z0
	VMOVDQU64    Z0, 192(SP)
	MOVL         j0+24(FP), AX
	VPBROADCASTQ AX, Z15
	VPADDQ       bmk<>+1624(SB), Z15, Z15   // (j0, ..., j0+7)

loopz:
	VMOVDQA64 Z15, Z0
	VMOVDQU64 128(SP), Z1
	VMOVDQU64 192(SP), Z2
	VPBROADCASTQ bmk<>+1568(SB), Z3
	VMOVDQU64 0(SP), Z4
	VMOVDQU64 64(SP), Z5
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	PHILOX_ROUND_Z
	BOX_MULLER_Z(Z0, Z1, Y0, Y1)
	BOX_MULLER_Z(Z2, Z3, Y2, Y3)
	// Counter i's four values are (Y0[i], Y1[i], Y2[i], Y3[i]): transpose in 128-bit lanes,
	// then gather the lanes.
	VUNPCKLPS  Y1, Y0, Y4
	VUNPCKHPS  Y1, Y0, Y5
	VUNPCKLPS  Y3, Y2, Y6
	VUNPCKHPS  Y3, Y2, Y7
	VUNPCKLPD  Y6, Y4, Y0
	VUNPCKHPD  Y6, Y4, Y1
	VUNPCKLPD  Y7, Y5, Y2
	VUNPCKHPD  Y7, Y5, Y3
	VPERM2F128 $0x20, Y1, Y0, Y4
	VPERM2F128 $0x20, Y3, Y2, Y5
	VPERM2F128 $0x31, Y1, Y0, Y6
	VPERM2F128 $0x31, Y3, Y2, Y7
	VMOVUPS    Y4, 0(DI)
	VMOVUPS    Y5, 32(DI)
	VMOVUPS    Y6, 64(DI)
	VMOVUPS    Y7, 96(DI)
	VPADDQ.BCST bmk<>+1616(SB), Z15, Z15
	ADDQ       $128, DI
	DECQ       CX
	JNZ        loopz
	VZEROUPPER
	RET
