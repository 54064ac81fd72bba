package cpu

import "github.com/fedaudit/fedaudit/compute"

// Packed, blocked single-precision GEMM for the Backend backend. op(A) (M x K) and op(B) (K x N)
// are copied block by block into zero-padded panels of gemmMR rows and gemmNR columns; a
// micro-kernel multiplies one panel pair into an MR x NR tile. Every C element is therefore
// accumulated in the same order (k ascending, blocks of gemmKC) whatever the matrix sizes, the
// batch size or the thread count, which keeps results identical across shard layouts.

const (
	gemmMR = 6
	gemmNR = 16
	gemmMC = 48   // rows of op(A) per task: a multiple of gemmMR
	gemmKC = 1024 // depth of one packed block (784-feature inputs take one block)
	gemmNC = 128  // columns of op(B) per task: a multiple of gemmNR

	// packDepth is the depth of one block of a transposing pack: packDepth x gemmNR values
	// (4 KiB) stay in L1 while each source row contributes its part.
	packDepth = 64
)

// transposedRowsMax is the most rows of a (c's rows) for which c = a b^T with a per batch
// element takes the transposed path; a variable so that a test can turn that off.
var transposedRowsMax = gemmNC

// inPlaceRowsMax is the most rows of op(A) read in place by run (inPlaceRows): a dense
// layer's weights of up to 192 units against a minibatch of samples; a variable so that a
// test can compare that path with the packed one.
var inPlaceRowsMax = 4 * gemmMC

// gemmScratch is one worker's packing memory.
type gemmScratch struct {
	a    [gemmMC * gemmKC]float32
	b    [gemmKC * gemmNC]float32
	acc  [gemmMR * gemmNR]float32
	acc2 [gemmMR * 2 * gemmNR]float32     // the double-width kernels' tile
	acc4 [2 * gemmMR * 2 * gemmNR]float32 // the twelve-row strided kernel's tile
	// aKey names what a holds when it holds a whole depth block of one batch element's op(A)
	// (every row), so that the tasks of that element's column blocks which this worker runs
	// pack it once: the Gemm call's serial, the batch element and the block's depth offset.
	aKey [3]int
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

// gemmJob is the Gemm operation split into tasks (batch element, column block); a task walks
// all row blocks so that its packed block of op(B) is reused. An operand shared by the whole
// batch (BatchStride 0) is packed once per call into sharedA or sharedB.
type gemmJob struct {
	be               *Backend
	transA, transB   bool
	alpha, beta      float32
	a, b, c          compute.Mat
	m, n, k          int
	nBlocks          int
	sharedA, sharedB []float32 // whole op(A) / op(B) packed, or nil
	mPad, nPad       int       // rows of op(A), columns of op(B) rounded up to whole panels
	// nc is the columns per task: gemmNC, or all of them (op(B) prepacked, or one transposed
	// task per batch element).
	nc int
	// transposed: c = a b^T is computed as c^T = b a^T, the rows of b read in place by the
	// strided kernel and a^T packed once per call (a shared: sharedA, as column panels of c's
	// rows) or by each task (a per batch element, of few rows).
	transposed bool
	serial     int          // counts Gemm calls: scratch keyed by it is never reused across calls
	patches    *patchSource // op(B) packed from an image (ConvForward), or nil
}

// prepack packs a shared operand whole: block p0 of depth kc starts at p0*mPad (A) or p0*nPad
// (B), laid out as packA/packB lay out one block. The packing is split over the pool by
// depth block and groups of panels (a first convolution's patches are 26 x 25,088 values,
// which one goroutine took a millisecond to pack while the other waited).
func (g *gemmJob) prepack() {
	g.sharedA, g.sharedB = nil, nil
	g.mPad = (g.m + gemmMR - 1) / gemmMR * gemmMR
	g.nPad = (g.n + gemmNR - 1) / gemmNR * gemmNR
	if g.transposed {
		g.mPad = (g.m + gemmNR - 1) / gemmNR * gemmNR
		if g.a.BatchStride != 0 {
			return // each task packs its batch element's a^T (runTransposed)
		}
		g.sharedA = g.be.growShared(0, g.mPad*g.k)
		g.be.pack.do(g.be, g.sharedA, g.a, true, true, g.m, g.mPad, g.k)
		return
	}
	if g.c.Batch < 2 {
		return
	}
	if g.a.BatchStride == 0 {
		g.sharedA = g.be.growShared(0, g.mPad*g.k)
		g.be.pack.do(g.be, g.sharedA, g.a, false, g.transA, g.m, g.mPad, g.k)
	}
	if g.b.BatchStride == 0 {
		g.sharedB = g.be.growShared(1, g.nPad*g.k)
		g.be.pack.do(g.be, g.sharedB, g.b, true, g.transB, g.n, g.nPad, g.k)
	}
}

// packJob packs a whole operand (prepack) in tasks of one depth block and up to packGroup
// rows (panels of op(A)) or columns (panels of op(B)).
type packJob struct {
	dst     []float32
	src     []float32
	ld      int
	panelsB bool // packB's panels of gemmNR columns, else packA's of gemmMR rows
	trans   bool
	n, nPad int // rows of op(A) or columns of op(B), and that rounded up to whole panels
	k       int
	groups  int // tasks per depth block
}

// packGroup is the rows or columns of one packing task: whole panels of either kind.
const packGroup = 64 * gemmMR * gemmNR / 2

func (j *packJob) do(be *Backend, dst []float32, m compute.Mat, panelsB, trans bool, n, nPad, k int) {
	*j = packJob{dst: dst, src: data(m.Buf)[m.Off:], ld: m.Stride, panelsB: panelsB, trans: trans, n: n, nPad: nPad, k: k}
	j.groups = (n + packGroup - 1) / packGroup
	blocks := (k + gemmKC - 1) / gemmKC
	be.pool.doSized(j, blocks*j.groups, n*k)
	j.dst, j.src = nil, nil
}

func (j *packJob) run(task, _ int) {
	p0 := task / j.groups * gemmKC
	kc := min(gemmKC, j.k-p0)
	i0 := task % j.groups * packGroup
	cnt := min(packGroup, j.n-i0)
	dst := j.dst[p0*j.nPad+i0*kc:]
	if j.panelsB {
		packB(dst, j.src, j.ld, j.trans, i0, cnt, p0, kc)
		return
	}
	packA(dst, j.src, j.ld, j.trans, i0, cnt, p0, kc)
}

func (g *gemmJob) run(task, worker int) {
	if g.transposed {
		g.runTransposed(task, worker)
		return
	}
	nb := task % g.nBlocks
	batch := task / g.nBlocks
	s := &g.be.scratch[worker].gemm
	j0 := nb * g.nc
	nc := min(g.nc, g.n-j0)
	a := data(g.a.Buf)[g.a.Off+batch*g.a.BatchStride:]
	b := data(g.b.Buf)[g.b.Off+batch*g.b.BatchStride:]
	c := data(g.c.Buf)[g.c.Off+batch*g.c.BatchStride:]
	// With beta = 0 each tile of c is cleared just before the first block's kernel adds into
	// it, while it is in cache, instead of in a pass over the whole block of c beforehand.
	clearTiles := g.beta == 0 && g.k > 0
	g.applyBeta(c, j0, nc)
	for p0 := 0; p0 < g.k; p0 += gemmKC {
		kc := min(gemmKC, g.k-p0)
		bPack := g.blockB(s, b, batch, j0, nc, p0, kc)
		// A small op(A) (a layer's weights, a minibatch's activations) is packed whole, once
		// per batch element and depth block on each worker, instead of once per column block.
		wholeA := g.sharedA == nil && g.mPad*kc <= len(s.a)
		inPlaceA := g.readsAInPlace(kc)
		if inPlaceA {
			g.inPlaceRows(s, a, bPack, c, kc, p0, j0, nc)
			continue
		}
		if key := [3]int{g.serial, batch, p0}; wholeA && s.aKey != key {
			packA(s.a[:], a, g.a.Stride, g.transA, 0, g.m, p0, kc)
			s.aKey = key
		}
		for i0 := 0; i0 < g.m; i0 += gemmMC {
			mc := min(gemmMC, g.m-i0)
			var aPack []float32
			switch {
			case g.sharedA != nil:
				aPack = g.sharedA[p0*g.mPad+i0*kc:]
			case wholeA:
				aPack = s.a[i0*kc:]
			default:
				packA(s.a[:], a, g.a.Stride, g.transA, i0, mc, p0, kc)
				aPack = s.a[:]
				s.aKey = [3]int{} // serials start at 1: matches no call
			}
			// With beta = 0 the first depth block's AVX-512 kernels store their tiles
			// (alpha acc + 0, as if added into a cleared c) and nothing is cleared.
			store := clearTiles && p0 == 0 && useAVX512
			clearFirst := clearTiles && p0 == 0 && !store
			g.rowBlock(s, aPack, bPack, c, kc, i0, mc, j0, nc, store, clearFirst)
		}
	}
}

// applyBeta scales columns [j0, j0+nc) of c by beta before run adds alpha op(A) op(B) into
// them, or clears them when there is no depth to add (k = 0). It is its own piece because it
// is one pass over the task's block of c ahead of the blocked loops, which beta = 1 (and
// beta = 0 with a depth, cleared tile by tile in rowBlock) skips.
func (g *gemmJob) applyBeta(c []float32, j0, nc int) {
	ldc := g.c.Stride
	if g.beta == 0 && g.k == 0 {
		for i := 0; i < g.m; i++ {
			clear(c[i*ldc+j0 : i*ldc+j0+nc])
		}
	}
	if g.beta != 0 && g.beta != 1 {
		for i := 0; i < g.m; i++ {
			row := c[i*ldc+j0 : i*ldc+j0+nc]
			for j := range row {
				row[j] *= g.beta
			}
		}
	}
}

// blockB returns the packed panels of op(B) for columns [j0, j0+nc) and the depth block at p0
// of kc: the slice of the call's prepacked op(B), or the worker's scratch packed from an image
// (patches) or from b. It is its own piece because the three sources of op(B) are one choice
// made once per depth block, apart from the row blocks that read its result.
func (g *gemmJob) blockB(s *gemmScratch, b []float32, batch, j0, nc, p0, kc int) []float32 {
	switch {
	case g.sharedB != nil:
		return g.sharedB[p0*g.nPad+j0*kc:]
	case g.patches != nil:
		g.patches.pack(s.b[:], batch, j0, nc, p0, kc)
	default:
		packB(s.b[:], b, g.b.Stride, g.transB, j0, nc, p0, kc)
	}
	return s.b[:]
}

// rowBlock adds alpha op(A) op(B) for one depth block of kc to the tiles of c in rows
// [i0, i0+mc) and columns [j0, j0+nc), from the packed panels aPack (the row block's) and
// bPack (the column block's). With store the kernels replace c's tiles (beta = 0, first depth
// block, AVX-512); with clearFirst each tile is cleared before the kernel adds into it (the
// same without AVX-512). It is its own piece because it is the micro-kernel dispatch over the
// block's tiles (four-, double- or single-panel kernels, padded edges), the innermost work of
// run, apart from choosing and packing the panels it reads.
func (g *gemmJob) rowBlock(s *gemmScratch, aPack, bPack, c []float32, kc, i0, mc, j0, nc int, store, clearFirst bool) {
	ldc := g.c.Stride
	nPanels := (nc + gemmNR - 1) / gemmNR
	mPanels := (mc + gemmMR - 1) / gemmMR
	for jp := 0; jp < nPanels; {
		jb := j0 + jp*gemmNR
		// Panels of op(B) in this pass: two go through one double-width kernel, also when
		// the second is partial (its padding columns are zeros in the packed block).
		width := 1
		if useAVX512 && jp+1 < nPanels {
			width = 2
		}
		fullCols := j0+nc-jb >= 2*gemmNR
		for ip := 0; ip < mPanels; ip++ {
			ib := i0 + ip*gemmMR
			mr := min(gemmMR, i0+mc-ib)
			ap := aPack[ip*kc*gemmMR:]
			if clearFirst {
				// Without AVX-512 the tile is one panel (width 1) of mr rows, which
				// the kernels below add into.
				cols := min(gemmNR, j0+nc-jb)
				for i := ib; i < ib+mr; i++ {
					clear(c[i*ldc+jb : i*ldc+jb+cols])
				}
			}
			// Two full row panels at once: each panel row of b serves twice the rows.
			if width == 2 && fullCols && i0+mc-ib >= 2*gemmMR && kernelToC4(kc, ap, bPack[jp*kc*gemmNR:], c[ib*ldc+jb:], ldc, g.alpha, store) {
				ip++
				continue
			}
			if width == 2 && fullCols && mr == gemmMR && kernelToC2(kc, ap, bPack[jp*kc*gemmNR:], c[ib*ldc+jb:], ldc, g.alpha, store) {
				continue
			}
			if width == 2 {
				// A last panel of fewer rows or columns (zero-padded): the double-width
				// kernel into a tile (t = alpha acc + 0), then its rows added to c, which
				// is c + alpha acc as in the kernel (up to the sign of a zero), or with
				// store copied, which is the kernel's store.
				t := s.acc2[:]
				if kernelToC2(kc, ap, bPack[jp*kc*gemmNR:], t, 2*gemmNR, g.alpha, true) {
					cols := min(2*gemmNR, j0+nc-jb)
					for i := 0; i < mr; i++ {
						if store {
							copy(c[(ib+i)*ldc+jb:][:cols], t[i*2*gemmNR:][:cols])
							continue
						}
						subScaled(-1, t[i*2*gemmNR:][:cols], c[(ib+i)*ldc+jb:][:cols])
					}
					continue
				}
			}
			for q := jp; q < jp+width; q++ {
				jq := j0 + q*gemmNR
				g.tile(kc, ap, bPack[q*kc*gemmNR:], c, ib, mr, jq, min(gemmNR, j0+nc-jq), s, store)
			}
		}
		jp += width
	}
}

// readsAInPlace reports whether run reads op(A) in place (inPlaceRows) for a depth block of kc:
// whole panels of a row-major op(A) (a first convolution's output gradient: 6 channels, a long
// depth of pixels times samples; a dense layer's weights) are read by the strided kernel
// instead of being interleaved into a packed copy, when a packed copy would serve few column
// panels (at most four: a minibatch of samples) and the depth makes each tile's own addition
// into c a small part of its work.
func (g *gemmJob) readsAInPlace(kc int) bool {
	return useAVX512 && g.sharedA == nil && !g.transA && !g.transposed && g.m%gemmMR == 0 &&
		g.m <= inPlaceRowsMax && g.n <= 4*gemmNR && kc >= 64
}

// inPlaceRows adds alpha op(A) op(B) for one depth block to columns [j0, j0+nc) of c, every
// row of a read in place MR rows at a time against the packed panels of op(B) (bPack), two
// panels per kernel where there are two. The fused multiply-adds of each element are those
// of the packed kernels, so the results are the same bits.
func (g *gemmJob) inPlaceRows(s *gemmScratch, a, bPack, c []float32, kc, p0, j0, nc int) {
	lda, ldc := g.a.Stride, g.c.Stride
	nPanels := (nc + gemmNR - 1) / gemmNR
	for ib := 0; ib < g.m; ib += gemmMR {
		ar := a[ib*lda+p0:]
		for jp := 0; jp < nPanels; {
			jb := j0 + jp*gemmNR
			bp := bPack[jp*kc*gemmNR:]
			var acc []float32
			width := 1
			if jp+1 < nPanels && kernelStrided2(kc, ar, lda, bp, &s.acc2) {
				acc, width = s.acc2[:], 2
			} else if kernelStrided(kc, ar, lda, bp, &s.acc) {
				acc = s.acc[:]
			} else {
				panic("cpu: inPlaceRows without AVX-512") // run takes this path only with it
			}
			cols := min(width*gemmNR, j0+nc-jb)
			for i := 0; i < gemmMR; i++ {
				row := c[(ib+i)*ldc+jb:][:cols]
				src := acc[i*width*gemmNR:][:cols]
				if g.beta == 0 && p0 == 0 {
					for j, v := range src {
						row[j] = 0 + float32(g.alpha*v)
					}
					continue
				}
				for j, v := range src {
					row[j] += float32(g.alpha * v) // rounded first, as the kernels do: never fused
				}
			}
			jp += width
		}
	}
}

// tile adds alpha times the product of panels ap and bp to c's mr x nr tile at (ib, jb).
// With store, c's old values are replaced (by 0 + alpha acc, the bits of adding into zeros).
func (g *gemmJob) tile(kc int, ap, bp, c []float32, ib, mr, jb, nr int, s *gemmScratch, store bool) {
	ldc := g.c.Stride
	if mr == gemmMR && nr == gemmNR && kernelToC(kc, ap, bp, c[ib*ldc+jb:], ldc, g.alpha, store) {
		return
	}
	kernel(kc, ap, bp, &s.acc)
	for i := 0; i < mr; i++ {
		row := c[(ib+i)*ldc+jb : (ib+i)*ldc+jb+nr]
		acc := s.acc[i*gemmNR : i*gemmNR+nr]
		if store {
			for j := range row {
				row[j] = 0 + float32(g.alpha*acc[j])
			}
			continue
		}
		for j := range row {
			row[j] += float32(g.alpha * acc[j]) // rounded first, as the kernels do: never fused
		}
	}
}

// runTransposed computes columns [j0, j0+nc) of c = a b^T for one batch element: tiles of
// c^T are b's rows (read in place, MR at a time) times panels of a^T. Each element is the same
// sequence of fused multiply-adds as in run, so both paths give identical results.
func (g *gemmJob) runTransposed(task, worker int) {
	nb := task % g.nBlocks
	batch := task / g.nBlocks
	s := &g.be.scratch[worker].gemm
	j0 := nb * g.nc
	nc := min(g.nc, g.n-j0)
	b := data(g.b.Buf)[g.b.Off+batch*g.b.BatchStride:]
	c := data(g.c.Buf)[g.c.Off+batch*g.c.BatchStride:]
	ldb, ldc := g.b.Stride, g.c.Stride
	for i := 0; i < g.m; i++ {
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
	mPanels := (g.m + gemmNR - 1) / gemmNR
	for p0 := 0; p0 < g.k; p0 += gemmKC {
		kc := min(gemmKC, g.k-p0)
		// a^T's panels of this depth block: packed once per call when a is shared, else for
		// this batch element here.
		var aT []float32
		if g.sharedA != nil {
			aT = g.sharedA[p0*g.mPad:]
		} else {
			a := data(g.a.Buf)[g.a.Off+batch*g.a.BatchStride:]
			packB(s.b[:], a, g.a.Stride, true, 0, g.m, p0, kc)
			aT = s.b[:]
		}
		for jb := j0; jb < j0+nc; {
			if jb+2*gemmMR > j0+nc {
				g.transposedRows(s, aT, b, c, kc, p0, jb, j0+nc, 0)
				jb += gemmMR
				continue
			}
			// Twelve rows of b at once against two panels of a^T: each panel row loaded
			// serves twice the rows (half the traffic from L2 per multiply-add).
			ip := 0
			for ; ip+1 < mPanels && g.m-ip*gemmNR >= 2*gemmNR; ip += 2 {
				if !kernelStrided4(kc, b[jb*ldb+p0:], ldb, aT[ip*kc*gemmNR:], &s.acc4) {
					break
				}
				ib := ip * gemmNR
				for ii := 0; ii < 2*gemmMR; ii++ {
					for jj, v := range s.acc4[ii*2*gemmNR : (ii+1)*2*gemmNR] {
						c[(ib+jj)*ldc+jb+ii] += float32(g.alpha * v)
					}
				}
			}
			g.transposedRows(s, aT, b, c, kc, p0, jb, j0+nc, ip)
			g.transposedRows(s, aT, b, c, kc, p0, jb+gemmMR, j0+nc, ip)
			jb += 2 * gemmMR
		}
	}
}

// transposedRows is runTransposed for the block of up to MR rows of b (one batch element's) at
// jb, rows before end, and the panels of a^T (aT, this depth block's) from ip on.
func (g *gemmJob) transposedRows(s *gemmScratch, aT, b, c []float32, kc, p0, jb, end, ip int) {
	ldb, ldc := g.b.Stride, g.c.Stride
	mPanels := (g.m + gemmNR - 1) / gemmNR
	mr := min(gemmMR, end-jb)
	// A last block of fewer than MR rows is read in place as the MR rows ending with it, when
	// there are that many (64 hidden units = 10 blocks of 6 and one of 4): the rows before it
	// are computed again and dropped, which costs less than packing.
	rb := jb
	if mr < gemmMR && jb+mr >= gemmMR {
		rb = jb + mr - gemmMR
	}
	full := jb+mr-rb == gemmMR
	if !full {
		packA(s.a[:], b, ldb, false, jb, mr, p0, kc)
	}
	for ; ip < mPanels; ip++ {
		ap := aT[ip*kc*gemmNR:]
		ib := ip * gemmNR
		if full && ip+1 < mPanels && g.m-ib >= 2*gemmNR && kernelStrided2(kc, b[rb*ldb+p0:], ldb, ap, &s.acc2) {
			// both panels at once: a's rows are read once
			for ii := 0; ii < mr; ii++ {
				acc := s.acc2[(ii+jb-rb)*2*gemmNR : (ii+jb-rb+1)*2*gemmNR]
				for jj, v := range acc {
					c[(ib+jj)*ldc+jb+ii] += float32(g.alpha * v)
				}
			}
			ip++
			continue
		}
		if !full || !kernelStrided(kc, b[rb*ldb+p0:], ldb, ap, &s.acc) {
			if full {
				packA(s.a[:], b, ldb, false, rb, gemmMR, p0, kc)
			}
			kernel(kc, s.a[:], ap, &s.acc)
		}
		nr := min(gemmNR, g.m-ib)
		for ii := 0; ii < mr; ii++ {
			acc := s.acc[(ii+jb-rb)*gemmNR : (ii+jb-rb)*gemmNR+nr]
			for jj, v := range acc {
				c[(ib+jj)*ldc+jb+ii] += float32(g.alpha * v)
			}
		}
	}
}

// packA copies rows [i0, i0+mc) and depth [p0, p0+kc) of op(A) into panels of gemmMR rows,
// depth-major within a panel, padding missing rows with zeros.
func packA(dst, a []float32, lda int, trans bool, i0, mc, p0, kc int) {
	if trans {
		// op(A)[i][p] = a[p*lda + i]: a row of a holds depth p of every panel, so one pass
		// over a's rows fills all panels.
		full := mc / gemmMR
		for p := 0; p < kc; p++ {
			src := a[(p0+p)*lda+i0:][:mc]
			for ip := 0; ip < full; ip++ {
				// element by element: a 24-byte array copy calls memmove
				s := src[ip*gemmMR : ip*gemmMR+gemmMR : ip*gemmMR+gemmMR]
				d := dst[(ip*kc+p)*gemmMR:][:gemmMR:gemmMR]
				d[0], d[1], d[2], d[3], d[4], d[5] = s[0], s[1], s[2], s[3], s[4], s[5]
			}
			if rows := mc - full*gemmMR; rows > 0 {
				d := dst[(full*kc+p)*gemmMR:][:gemmMR]
				for i := 0; i < gemmMR; i++ {
					d[i] = 0
					if i < rows {
						d[i] = src[full*gemmMR+i]
					}
				}
			}
		}
		return
	}
	for ip := 0; ip*gemmMR < mc; ip++ {
		panel := dst[ip*kc*gemmMR : (ip+1)*kc*gemmMR]
		rows := min(gemmMR, mc-ip*gemmMR)
		ib := i0 + ip*gemmMR
		if rows == gemmMR { // the six source rows side by side, one panel row at a time
			off := ib*lda + p0
			r0 := a[off : off+kc]
			r1 := a[off+lda:][:len(r0)]
			r2 := a[off+2*lda:][:len(r0)]
			r3 := a[off+3*lda:][:len(r0)]
			r4 := a[off+4*lda:][:len(r0)]
			r5 := a[off+5*lda:][:len(r0)]
			for p := range r0 {
				d := (*[gemmMR]float32)(panel[p*gemmMR:])
				d[0], d[1], d[2], d[3], d[4], d[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
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
				if cols == gemmNR {
					// Four 16-byte array copies: the compiler moves them inline, where one
					// 64-byte array copy becomes a call of runtime.memmove, which costs more
					// than the copy (go1.26).
					*(*[4]float32)(d[0:4]) = [4]float32(src[0:4])
					*(*[4]float32)(d[4:8]) = [4]float32(src[4:8])
					*(*[4]float32)(d[8:12]) = [4]float32(src[8:12])
					*(*[4]float32)(d[12:16]) = [4]float32(src[12:16])
					continue
				}
				for j, v := range src {
					d[j] = v
				}
				for j := cols; j < gemmNR; j++ {
					d[j] = 0
				}
			}
			continue
		}
		// Four source rows at a time fill four columns of the panel; blocks of packDepth keep
		// the panel lines being written in L1 across the passes.
		for pb := 0; pb < kc; pb += packDepth {
			pe := min(pb+packDepth, kc)
			blk := panel[pb*gemmNR : pe*gemmNR]
			j := 0
			for ; j+4 <= cols; j += 4 {
				off := (jb+j)*ldb + p0
				r0 := b[off+pb : off+pe]
				r1 := b[off+ldb+pb:][:len(r0)]
				r2 := b[off+2*ldb+pb:][:len(r0)]
				r3 := b[off+3*ldb+pb:][:len(r0)]
				for p := range r0 {
					d := (*[4]float32)(blk[p*gemmNR+j:])
					d[0], d[1], d[2], d[3] = r0[p], r1[p], r2[p], r3[p]
				}
			}
			for ; j < cols; j++ {
				src := b[(jb+j)*ldb+p0+pb : (jb+j)*ldb+p0+pe]
				for p, v := range src {
					blk[p*gemmNR+j] = v
				}
			}
		}
		for j := cols; j < gemmNR; j++ {
			for p := 0; p < kc; p++ {
				panel[p*gemmNR+j] = 0
			}
		}
	}
}
