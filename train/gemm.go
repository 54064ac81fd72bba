package train

// Packed, blocked single-precision GEMM for the CPU backend. op(A) (M x K) and op(B) (K x N)
// are copied block by block into zero-padded panels of gemmMR rows and gemmNR columns; a
// micro-kernel multiplies one panel pair into an MR x NR tile. Every C element is therefore
// accumulated in the same order (k ascending, blocks of gemmKC) whatever the matrix sizes, the
// batch size or the thread count, which keeps results identical across shard layouts.

const (
	gemmMR = 6
	gemmNR = 16
	gemmMC = 96  // rows of op(A) per task: a multiple of gemmMR
	gemmKC = 256 // depth of one packed block
	gemmNC = 256 // columns of op(B) per task: a multiple of gemmNR
)

// gemmScratch is one worker's packing memory.
type gemmScratch struct {
	a   [gemmMC * gemmKC]float32
	b   [gemmKC * gemmNC]float32
	acc [gemmMR * gemmNR]float32
}

// kernelGo is the portable micro-kernel: acc = sum_p a[p,:]^T b[p,:] over kc steps.
func kernelGo(kc int, a, b []float32, acc *[gemmMR * gemmNR]float32) {
	*acc = [gemmMR * gemmNR]float32{}
	a = a[:kc*gemmMR]
	b = b[:kc*gemmNR]
	for p := 0; p < kc; p++ {
		ap := a[p*gemmMR : p*gemmMR+gemmMR]
		bp := b[p*gemmNR : p*gemmNR+gemmNR]
		for i, ai := range ap {
			ci := acc[i*gemmNR : i*gemmNR+gemmNR]
			for j, bj := range bp {
				ci[j] += ai * bj
			}
		}
	}
}

// gemmJob is the Gemm operation split into tasks (batch element, row block, column block).
type gemmJob struct {
	be             *CPU
	transA, transB bool
	alpha, beta    float32
	a, b, c        Mat
	m, n, k        int
	mBlocks        int
	nBlocks        int
}

func (g *gemmJob) run(task, worker int) {
	nb := task % g.nBlocks
	task /= g.nBlocks
	mb := task % g.mBlocks
	batch := task / g.mBlocks
	s := &g.be.scratch[worker].gemm
	i0, j0 := mb*gemmMC, nb*gemmNC
	mc, nc := min(gemmMC, g.m-i0), min(gemmNC, g.n-j0)
	a := data(g.a.Buf)[g.a.Off+batch*g.a.BatchStride:]
	b := data(g.b.Buf)[g.b.Off+batch*g.b.BatchStride:]
	c := data(g.c.Buf)[g.c.Off+batch*g.c.BatchStride:]
	ldc := g.c.Stride
	for i := i0; i < i0+mc; i++ {
		row := c[i*ldc+j0 : i*ldc+j0+nc]
		switch g.beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= g.beta
			}
		}
	}
	mPanels := (mc + gemmMR - 1) / gemmMR
	nPanels := (nc + gemmNR - 1) / gemmNR
	for p0 := 0; p0 < g.k; p0 += gemmKC {
		kc := min(gemmKC, g.k-p0)
		packA(s.a[:], a, g.a.Stride, g.transA, i0, mc, p0, kc)
		packB(s.b[:], b, g.b.Stride, g.transB, j0, nc, p0, kc)
		for jp := 0; jp < nPanels; jp++ {
			bp := s.b[jp*kc*gemmNR:]
			for ip := 0; ip < mPanels; ip++ {
				kernel(kc, s.a[ip*kc*gemmMR:], bp, &s.acc)
				ib, jb := i0+ip*gemmMR, j0+jp*gemmNR
				mr, nr := min(gemmMR, i0+mc-ib), min(gemmNR, j0+nc-jb)
				for i := 0; i < mr; i++ {
					row := c[(ib+i)*ldc+jb : (ib+i)*ldc+jb+nr]
					acc := s.acc[i*gemmNR : i*gemmNR+nr]
					for j := range row {
						row[j] += g.alpha * acc[j]
					}
				}
			}
		}
	}
}

// packA copies rows [i0, i0+mc) and depth [p0, p0+kc) of op(A) into panels of gemmMR rows,
// depth-major within a panel, padding missing rows with zeros.
func packA(dst, a []float32, lda int, trans bool, i0, mc, p0, kc int) {
	for ip := 0; ip*gemmMR < mc; ip++ {
		panel := dst[ip*kc*gemmMR : (ip+1)*kc*gemmMR]
		rows := min(gemmMR, mc-ip*gemmMR)
		ib := i0 + ip*gemmMR
		if trans { // op(A)[i][p] = a[p*lda + i]: rows of the panel are contiguous in a
			for p := 0; p < kc; p++ {
				src := a[(p0+p)*lda+ib:]
				d := panel[p*gemmMR : p*gemmMR+gemmMR]
				for i := 0; i < rows; i++ {
					d[i] = src[i]
				}
				for i := rows; i < gemmMR; i++ {
					d[i] = 0
				}
			}
			continue
		}
		for i := 0; i < rows; i++ {
			src := a[(ib+i)*lda+p0 : (ib+i)*lda+p0+kc]
			for p, v := range src {
				panel[p*gemmMR+i] = v
			}
		}
		for i := rows; i < gemmMR; i++ {
			for p := 0; p < kc; p++ {
				panel[p*gemmMR+i] = 0
			}
		}
	}
}

// packB copies depth [p0, p0+kc) and columns [j0, j0+nc) of op(B) into panels of gemmNR
// columns, depth-major within a panel, padding missing columns with zeros.
func packB(dst, b []float32, ldb int, trans bool, j0, nc, p0, kc int) {
	for jp := 0; jp*gemmNR < nc; jp++ {
		panel := dst[jp*kc*gemmNR : (jp+1)*kc*gemmNR]
		cols := min(gemmNR, nc-jp*gemmNR)
		jb := j0 + jp*gemmNR
		if !trans { // op(B)[p][j] = b[p*ldb + j]: a panel row is contiguous in b
			for p := 0; p < kc; p++ {
				src := b[(p0+p)*ldb+jb : (p0+p)*ldb+jb+cols]
				d := panel[p*gemmNR : p*gemmNR+gemmNR]
				copy(d, src)
				clear(d[cols:])
			}
			continue
		}
		for j := 0; j < cols; j++ {
			src := b[(jb+j)*ldb+p0 : (jb+j)*ldb+p0+kc]
			for p, v := range src {
				panel[p*gemmNR+j] = v
			}
		}
		for j := cols; j < gemmNR; j++ {
			for p := 0; p < kc; p++ {
				panel[p*gemmNR+j] = 0
			}
		}
	}
}
