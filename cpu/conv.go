package cpu

import (
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu/internal/simd"
	"github.com/fedaudit/fedaudit/internal/imgops"
)

var _ compute.Convolver = (*Backend)(nil)

// convOp names an operation of convJob.
type convOp int

const (
	opIm2col convOp = iota
	opCol2im
	opMaxPool
	opAvgPool
	opMaxPoolGrad
	opAvgPoolGrad
	opGroupStats
	opGroupNorm
	opGroupNormGradX
	opGroupNormGradParams
	opTranspose
)

// convJob runs the image operations of compute.Convolver with package imgops, split into tasks
// of whole output units (rows of patches, channels, planes, samples) of one batch element.
type convJob struct {
	op           convOp
	x, y, z      compute.Images
	m, n         compute.Mat // patches; gamma/beta or dgamma/dbeta; transpose operands
	m2, m3       compute.Mat
	win          imgops.Win
	groups       int
	eps          float64
	block        int
	units, per   int // units of one batch element, units per task
	tasks        int // tasks per batch element
	mean, rstd   []float64
	statsPerElem int
}

// pool2 is the common 2x2 pooling window at stride 2, whose max pooling runs on the SIMD
// kernels of package simd (the same bits as imgops' portable ones).
var (
	pool2    = imgops.Win{K: 2, S: 2}
	simdMax2 = imgops.Max2[float32]{Max: simd.Max4Rows, Grad: simd.Max4GradRows}
	// addInto is Col2im's addition dst += src in AVX2 (y - (-1) x: the same bits as y + x).
	addInto = func(dst, src []float32) { subScaled(-1, src, dst[:len(src)]) }
)

func geom(x compute.Images) imgops.Geom { return imgops.Geom{C: x.C, N: x.N, H: x.H, W: x.W} }

func imgAt(x compute.Images, b int) []float32 { return data(x.Buf)[x.Off+b*x.BatchStride:] }

func matAt(m compute.Mat, b int) []float32 { return data(m.Buf)[m.Off+b*m.BatchStride:] }

// runConv splits units units of each of batch elements into tasks of about minWork values of
// work each (work per unit given) and runs them.
func (c *Backend) runConv(batch, units, workPerUnit int) {
	j := &c.conv
	if batch == 0 || units == 0 {
		return
	}
	const minWork = 8192
	j.units = units
	j.per = max(1, min(units, minWork/max(1, workPerUnit)))
	j.tasks = (units + j.per - 1) / j.per
	c.pool.doSized(j, batch*j.tasks, batch*units*workPerUnit)
}

func (j *convJob) run(task, _ int) {
	b, t := task/j.tasks, task%j.tasks
	u0 := t * j.per
	u1 := min(u0+j.per, j.units)
	switch j.op {
	case opIm2col:
		imgops.Im2col(imgAt(j.x, b), geom(j.x), j.win, matAt(j.m, b), j.m.Stride, u0, u1)
	case opCol2im:
		imgops.Col2im(matAt(j.m, b), j.m.Stride, geom(j.x), j.win, imgAt(j.x, b), u0, u1, addInto)
	case opMaxPool:
		if j.win == pool2 {
			imgops.MaxPool2(imgAt(j.x, b), geom(j.x), imgAt(j.y, b), u0, u1, simdMax2)
			break
		}
		imgops.MaxPool(imgAt(j.x, b), geom(j.x), j.win, imgAt(j.y, b), u0, u1)
	case opAvgPool:
		imgops.AvgPool(imgAt(j.x, b), geom(j.x), j.win, imgAt(j.y, b), u0, u1)
	case opMaxPoolGrad:
		if j.win == pool2 {
			imgops.MaxPool2Grad(imgAt(j.x, b), geom(j.x), imgAt(j.y, b), imgAt(j.z, b), u0, u1, simdMax2)
			break
		}
		imgops.MaxPoolGrad(imgAt(j.x, b), geom(j.x), j.win, imgAt(j.y, b), imgAt(j.z, b), u0, u1)
	case opAvgPoolGrad:
		imgops.AvgPoolGrad(geom(j.x), j.win, imgAt(j.y, b), imgAt(j.z, b), u0, u1)
	case opGroupStats:
		s := j.mean[b*j.statsPerElem:][:j.statsPerElem]
		r := j.rstd[b*j.statsPerElem:][:j.statsPerElem]
		imgops.GroupStats(imgAt(j.x, b), geom(j.x), j.groups, j.eps, s, r, u0, u1)
	case opGroupNorm:
		s := j.mean[b*j.statsPerElem:][:j.statsPerElem]
		r := j.rstd[b*j.statsPerElem:][:j.statsPerElem]
		imgops.GroupStats(imgAt(j.x, b), geom(j.x), j.groups, j.eps, s, r, u0, u1)
		imgops.GroupNorm(imgAt(j.x, b), geom(j.x), j.groups, s, r, matAt(j.m, b), matAt(j.n, b), imgAt(j.y, b), u0, u1)
	case opGroupNormGradX:
		s := j.mean[b*j.statsPerElem:][:j.statsPerElem]
		r := j.rstd[b*j.statsPerElem:][:j.statsPerElem]
		imgops.GroupNormGradX(imgAt(j.x, b), geom(j.x), j.groups, s, r, matAt(j.m, b), imgAt(j.y, b), imgAt(j.z, b), u0, u1)
	case opGroupNormGradParams:
		s := j.mean[b*j.statsPerElem:][:j.statsPerElem]
		r := j.rstd[b*j.statsPerElem:][:j.statsPerElem]
		imgops.GroupNormGradParams(imgAt(j.x, b), geom(j.x), j.groups, s, r, imgAt(j.y, b), matAt(j.m2, b), matAt(j.m3, b), u0, u1)
	case opTranspose:
		imgops.Transpose(j.block, matAt(j.m, b), j.m.Stride, j.m.Cols, matAt(j.n, b), j.n.Stride, u0, u1)
	}
}

func win(w compute.Window) imgops.Win { return imgops.Win{K: w.Size, S: w.Stride, P: w.Pad} }

// Im2col implements compute.Convolver.
func (c *Backend) Im2col(x compute.Images, w compute.Window, cols compute.Mat) {
	j := &c.conv
	j.op, j.x, j.win, j.m = opIm2col, x, win(w), cols
	c.runConv(cols.Batch, cols.Rows, cols.Cols)
}

// Col2im implements compute.Convolver.
func (c *Backend) Col2im(cols compute.Mat, w compute.Window, dx compute.Images) {
	j := &c.conv
	j.op, j.m, j.win, j.x = opCol2im, cols, win(w), dx
	c.runConv(dx.Batch, dx.C, cols.Cols*w.Size*w.Size)
}

// Pool implements compute.Convolver.
func (c *Backend) Pool(p compute.Pooling, w compute.Window, x, y compute.Images) {
	j := &c.conv
	j.op, j.win, j.x, j.y = opMaxPool, win(w), x, y
	if p == compute.AvgPooling {
		j.op = opAvgPool
	}
	c.runConv(y.Batch, y.C*y.H, y.W*y.N*w.Size*w.Size) // output rows
}

// PoolGrad implements compute.Convolver.
func (c *Backend) PoolGrad(p compute.Pooling, w compute.Window, x, dy, dx compute.Images) {
	j := &c.conv
	j.op, j.win, j.x, j.y, j.z = opMaxPoolGrad, win(w), x, dy, dx
	if p == compute.AvgPooling {
		j.op = opAvgPoolGrad
	}
	c.runConv(dx.Batch, dx.C, dy.H*dy.W*dy.N*w.Size*w.Size) // channels
}

// groupScratch sizes the float64 statistics for batch elements of x in groups.
func (c *Backend) groupScratch(x compute.Images, batch, groups int) {
	j := &c.conv
	j.statsPerElem = x.N * groups
	n := batch * j.statsPerElem
	if cap(j.mean) < n {
		j.mean, j.rstd = make([]float64, n), make([]float64, n)
	}
	j.mean, j.rstd = j.mean[:n], j.rstd[:n]
}

// GroupNorm implements compute.Convolver.
func (c *Backend) GroupNorm(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images) {
	j := &c.conv
	c.groupScratch(x, y.Batch, groups)
	j.op, j.groups, j.eps, j.x, j.m, j.n, j.y = opGroupNorm, groups, float64(eps), x, gamma, beta, y
	c.runConv(y.Batch, groups, 2*x.C/groups*x.H*x.W*x.N) // groups
}

// GroupNormGrad implements compute.Convolver.
func (c *Backend) GroupNormGrad(groups int, eps float32, x compute.Images, gamma compute.Mat, dy, dx compute.Images, dgamma, dbeta compute.Mat) {
	j := &c.conv
	batch := dgamma.Batch
	c.groupScratch(x, batch, groups)
	j.groups, j.eps, j.x = groups, float64(eps), x
	j.op = opGroupStats
	c.runConv(batch, groups, x.C/groups*x.H*x.W*x.N)
	if dx.Buf != nil {
		j.op, j.m, j.y, j.z = opGroupNormGradX, gamma, dy, dx
		c.runConv(batch, groups, 2*x.C/groups*x.H*x.W*x.N)
	}
	j.op, j.y, j.m2, j.m3 = opGroupNormGradParams, dy, dgamma, dbeta
	c.runConv(batch, x.C, x.N*x.H*x.W)
}

// Transpose implements compute.Convolver.
func (c *Backend) Transpose(block int, src, dst compute.Mat) {
	j := &c.conv
	j.op, j.block, j.m, j.n = opTranspose, block, src, dst
	c.runConv(dst.Batch, src.Rows, src.Cols*block)
}
