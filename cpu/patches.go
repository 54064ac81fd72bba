package cpu

import "github.com/fedaudit/fedaudit/compute"

// patchSource is op(B) of a convolution's forward product read from the image itself: the
// GEMM packs its panels of patches straight from x (implicit im2col) instead of from a
// patches matrix that Im2col wrote and the packing read back, one pass over a matrix C Size^2
// times the image's size fewer per replica. The panel values are the ones Im2col would write
// (its row of ones appended), so the product has the same bits.
type patchSource struct {
	x           []float32 // from the images' offset; batch element b at b*batchStride
	batchStride int
	h, w, n     int // input height, width and samples
	k, pad      int // window size and padding
	stride      int
	ow          int // output width
	kk          int // C Size Size: the row of ones is row kk
}

// ConvForward implements compute.PatchGemmer.
func (c *Backend) ConvForward(wb compute.Mat, x compute.Images, win compute.Window, y compute.Mat) {
	if x.BatchStride == 0 {
		panic("cpu: ConvForward with an image shared by the batch")
	}
	src := &c.patches
	kk := x.C * win.Size * win.Size
	*src = patchSource{
		x: data(x.Buf)[x.Off:], batchStride: x.BatchStride,
		h: x.H, w: x.W, n: x.N, k: win.Size, pad: win.Pad, stride: win.Stride, ow: win.Out(x.W), kk: kk,
	}
	cols := x.N * win.Out(x.H) * win.Out(x.W)
	b := compute.Mat{Buf: x.Buf, Off: x.Off, Rows: kk + 1, Cols: cols, Stride: cols, Batch: x.Batch, BatchStride: x.BatchStride}
	c.gemm.patches = src // until the next Gemm, which clears it
	c.gemmJob(false, false, 1, wb, b, 0, y)
}

// patchRun is a run of a panel's columns that belong to one output pixel: columns d0..d0+n-1
// of the panel are samples n0.. of pixel (oy, ox), whose window starts at (y0, x0).
type patchRun struct{ d0, len, n0, y0, x0 int }

// pack writes the panels of columns [j0, j0+nc) and depth [p0, p0+kc) of batch element
// batch's patches into dst, as packB lays out op(B). Rows are walked in order, (channel,
// window row, window column) counted up as the source offset moves: one pixel (N values) per
// window column, the rest of an image row at the end of a window row, the rest of a plane at
// the end of a channel.
func (s *patchSource) pack(dst []float32, batch, j0, nc, p0, kc int) {
	x := s.x[batch*s.batchStride:]
	N, H, W, K := s.n, s.h, s.w, s.k
	var runs [gemmNR]patchRun // a panel's columns are at most gemmNR runs
	for jp := 0; jp*gemmNR < nc; jp++ {
		panel := dst[jp*kc*gemmNR : (jp+1)*kc*gemmNR]
		jb := j0 + jp*gemmNR
		cols := min(gemmNR, nc-jp*gemmNR)
		nr := 0
		for col := jb; col < jb+cols; {
			pix, n0 := col/N, col%N
			l := min(N-n0, jb+cols-col)
			runs[nr] = patchRun{d0: col - jb, len: l, n0: n0, y0: pix/s.ow*s.stride - s.pad, x0: pix%s.ow*s.stride - s.pad}
			nr++
			col += l
		}
		c, i, j := p0/(K*K), p0/K%K, p0%K
		r := runs[0]
		// One pixel's 16 samples, its window inside the image: no zeros, no checks.
		if nr == 1 && cols == gemmNR && r.y0 >= 0 && r.y0+K <= H && r.x0 >= 0 && r.x0+K <= W {
			off := ((c*H+r.y0+i)*W+r.x0+j)*N + r.n0
			for p := 0; p < kc; p++ {
				d := panel[p*gemmNR : p*gemmNR+gemmNR]
				if p0+p == s.kk {
					for t := range d {
						d[t] = 1
					}
					continue
				}
				src := x[off:][:gemmNR]
				// Four 16-byte copies, moved inline (see packB).
				*(*[4]float32)(d[0:4]) = [4]float32(src[0:4])
				*(*[4]float32)(d[4:8]) = [4]float32(src[4:8])
				*(*[4]float32)(d[8:12]) = [4]float32(src[8:12])
				*(*[4]float32)(d[12:16]) = [4]float32(src[12:16])
				off += N
				if j++; j == K {
					j, off = 0, off+(W-K)*N
					if i++; i == K {
						i, off = 0, off+(H-K)*W*N
					}
				}
			}
			continue
		}
		for p := 0; p < kc; p++ {
			d := panel[p*gemmNR : p*gemmNR+gemmNR]
			if p0+p == s.kk {
				for t := range d {
					d[t] = 0
					if t < cols {
						d[t] = 1
					}
				}
				continue
			}
			for _, r := range runs[:nr] {
				iy, ix := r.y0+i, r.x0+j
				seg := d[r.d0 : r.d0+r.len]
				if uint(iy) >= uint(H) || uint(ix) >= uint(W) {
					clear(seg)
					continue
				}
				copy(seg, x[((c*H+iy)*W+ix)*N+r.n0:][:r.len])
			}
			clear(d[cols:])
			if j++; j == K {
				if j = 0; i+1 == K {
					i, c = 0, c+1
				} else {
					i++
				}
			}
		}
	}
}
