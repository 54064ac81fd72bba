package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fedaudit/fedaudit/kernels"
)

// ProfileEnv is the environment variable that turns on Options.Profile for every Ops.
const ProfileEnv = "FEDAUDIT_CUDA_PROFILE"

// OpTime is the device time one kind of operation took over a run: a kernel (by its name) or
// the GEMMs of one shape ("gemm NT 16x151x3200 x64": cuBLAS's column-major op(A), op(B), M x N
// x K, batch count and, when not float32, the precision).
type OpTime struct {
	Op      string  `json:"op"`
	Calls   int     `json:"calls"`
	Seconds float64 `json:"seconds"`
}

// EventTimer is implemented by devices that run their work asynchronously and can time it on
// the device (CUDA events): Mark records a time stamp behind the work issued so far.
type EventTimer interface {
	Mark() (Mark, error)
}

// Mark is a recorded time stamp of an EventTimer.
type Mark interface {
	// Since waits until the mark has passed and returns the device time in seconds from
	// earlier (recorded before it on the same device) to it.
	Since(earlier Mark) (float64, error)
	// Release returns the mark to the device; it must not be used afterwards.
	Release() error
}

// profileFlushAt is how many timed operations may wait for their marks to be read: reading
// them waits for the device, which leaves it idle while the host issues the next operations
// but does not change what each operation's own marks measure.
const profileFlushAt = 4096

// profiler is a Device that times every kernel launch and GEMM it passes on (Options.Profile):
// between two marks on an EventTimer device, with the host's clock around the call on a
// device that runs each call before returning (the host shim). A mark that ends one operation
// starts the next when no other device work (a copy, a staged upload, an allocation's zeroing)
// was issued between them, so a batch of launches costs one mark each. Graphs are not used
// while profiling: a graph's launches are not the device's to time one by one.
type profiler struct {
	Device
	timer   EventTimer
	open    Mark // the mark behind the last timed operation, if nothing was issued since
	marks   []Mark
	pending []timedOp
	totals  map[string]*OpTime
	err     error
}

// timedOp is an operation whose marks have not been read: marks[start] and marks[end].
type timedOp struct {
	op         string
	start, end int
}

func newProfiler(dev Device) *profiler {
	p := &profiler{Device: dev, totals: map[string]*OpTime{}}
	p.timer, _ = dev.(EventTimer)
	return p
}

func profileWanted(opt Options) bool { return opt.Profile || SwitchOn(ProfileEnv) }

// Launch implements Device.
func (p *profiler) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	return p.timed(k.Name(), func() error { return p.Device.Launch(k, grid, block, args) })
}

// Gemm implements Device.
func (p *profiler) Gemm(g GemmArgs) error {
	return p.timed(gemmOp(g), func() error { return p.Device.Gemm(g) })
}

// gemmOp names a GEMM by its shape, as cuBLAS sees it.
func gemmOp(g GemmArgs) string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	s := fmt.Sprintf("gemm %s%s %dx%dx%d x%d", t(g.TransA), t(g.TransB), g.M, g.N, g.K, g.Batch)
	switch g.Math {
	case MathTF32:
		s += " tf32"
	case MathBF16:
		s += " bf16"
	}
	return s
}

// The device work that is not timed ends the run of shared marks.

func (p *profiler) Write(dst uint64, src []byte) error { p.open = nil; return p.Device.Write(dst, src) }
func (p *profiler) Read(dst []byte, src uint64) error  { p.open = nil; return p.Device.Read(dst, src) }
func (p *profiler) Stage(src []byte) (uint64, error)   { p.open = nil; return p.Device.Stage(src) }
func (p *profiler) Alloc(n int) (uint64, error)        { p.open = nil; return p.Device.Alloc(n) }
func (p *profiler) Free(addr uint64) error             { p.open = nil; return p.Device.Free(addr) }

// timed runs call, the operation op, and adds its time. A failure of the timing itself ends
// the profile (Profile returns it) but never the operation.
func (p *profiler) timed(op string, call func() error) error {
	if p.err != nil {
		return call()
	}
	if p.timer == nil {
		start := time.Now()
		err := call()
		p.add(op, time.Since(start).Seconds())
		return err
	}
	if p.open == nil {
		m, err := p.timer.Mark()
		if err != nil {
			p.fail(err)
			return call()
		}
		p.marks = append(p.marks, m)
		p.open = m
	}
	start := len(p.marks) - 1
	err := call()
	m, merr := p.timer.Mark()
	if merr != nil {
		p.fail(merr)
		return err
	}
	p.marks = append(p.marks, m)
	p.open = m
	p.pending = append(p.pending, timedOp{op, start, len(p.marks) - 1})
	if len(p.pending) >= profileFlushAt {
		p.resolve()
	}
	return err
}

func (p *profiler) add(op string, seconds float64) {
	t := p.totals[op]
	if t == nil {
		t = &OpTime{Op: op}
		p.totals[op] = t
	}
	t.Calls++
	t.Seconds += seconds
}

func (p *profiler) fail(err error) {
	if p.err == nil {
		p.err = fmt.Errorf("profile: %w", err)
	}
	p.resolve()
}

// resolve reads the pending operations' marks and releases every mark but the open one.
func (p *profiler) resolve() {
	for _, t := range p.pending {
		if p.err != nil {
			break
		}
		s, err := p.marks[t.end].Since(p.marks[t.start])
		if err != nil {
			p.err = fmt.Errorf("profile: read the time of %s: %w", t.op, err)
			break
		}
		p.add(t.op, s)
	}
	p.pending = p.pending[:0]
	keep := p.marks[:0]
	for _, m := range p.marks {
		if m == p.open && p.err == nil {
			keep = append(keep, m)
			continue
		}
		if err := m.Release(); err != nil && p.err == nil {
			p.err = fmt.Errorf("profile: release a mark: %w", err)
		}
	}
	clear(p.marks[len(keep):])
	p.marks = keep
	if p.err != nil {
		p.open = nil
	}
}

// profile returns the totals, the largest first (ties by name).
func (p *profiler) profile() ([]OpTime, error) {
	p.resolve()
	out := make([]OpTime, 0, len(p.totals))
	for _, t := range p.totals {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b OpTime) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Op, b.Op))
	})
	return out, p.err
}

// release gives back the profiler's marks (Close).
func (p *profiler) release() error {
	p.open = nil
	p.resolve()
	return p.err
}

// Profile issues the queued work and returns the device time of every kind of operation since
// the Ops was made, the largest first, when Options.Profile (or FEDAUDIT_CUDA_PROFILE=1) is on;
// on a GPU that waits for the device. The error is that of the timing itself (the totals are
// then those read before it).
func (o *Ops) Profile() ([]OpTime, error) {
	if o.prof == nil {
		return nil, errors.New("profile: not on (Options.Profile or " + ProfileEnv + "=1)")
	}
	o.flush()
	return o.prof.profile()
}
