package cuda

import "fmt"

// Staging per-call arguments (Device.Stage) through a ring of device buffers.
//
// One reused staging buffer is correct only while the copy into it and every kernel that reads
// it run on one stream in issue order, with the host side of the copy consumed before the copy
// call returns: that is the legacy default stream with pageable host memory, where the driver
// takes the bytes synchronously and the stream orders the next copy after the kernels that read
// the previous arguments. It breaks as soon as any of that changes: with pinned host memory
// the copy runs later, so the host must not overwrite its source until the copy has run; with
// copies on their own stream (to overlap them with kernels), or kernels on several streams, the
// next copy may overwrite arguments that a queued kernel has not read yet; and a captured CUDA
// graph replays every node later, each needing its own arguments in place. A ring of slots
// with a fence per slot is correct in all these cases: a slot is handed out again only once
// the fence recorded after its last reader was issued has passed, which on a device that is
// not far behind costs no wait at all.
//
// Each slot has a device buffer and a pinned host buffer: the driver device copies the
// arguments into the host buffer and the asynchronous copy reads them from there when the
// stream reaches it, so the fence protects both halves (the host buffer must not be rewritten
// before its copy has run, the device buffer not before its readers have).

// fence is a point in the device's work queue (a CUDA event recorded on the stream).
type fence interface {
	// wait blocks until every piece of work issued before the fence was recorded has finished.
	wait() error
}

// stageMem is what the ring needs from a device.
type stageMem interface {
	alloc(n int) (uint64, error)
	free(addr uint64) error
	// allocHost returns n bytes of pinned (page-locked) host memory; freeHost releases it.
	allocHost(n int) ([]byte, error)
	freeHost(b []byte) error
	// record returns a fence after all work issued so far (nil when it needs none).
	record() (fence, error)
}

// stageRing hands out its slots round robin. A slot taken by take is valid for every launch
// issued before the next take (Device.Stage's contract); the next take retires it by
// recording a fence, and the slot is taken again only after that fence has passed.
type stageRing struct {
	mem   stageMem
	slots []stageSlot
	next  int // the slot the next take uses
	cur   int // the slot the last take handed out, -1 before the first
}

type stageSlot struct {
	addr  uint64
	host  []byte // pinned, size bytes
	size  int
	fence fence // recorded when the slot was retired; nil when free
}

// minStageSlot is the smallest slot: every per-call argument array of one W1 operation fits.
const minStageSlot = 1 << 16

func newStageRing(mem stageMem, slots int) *stageRing {
	return &stageRing{mem: mem, slots: make([]stageSlot, max(slots, 1)), cur: -1}
}

// take returns the device address and the pinned host buffer of a slot of at least n bytes
// that no queued work still reads.
func (r *stageRing) take(n int) (uint64, []byte, error) {
	if r.cur >= 0 {
		f, err := r.mem.record()
		if err != nil {
			return 0, nil, fmt.Errorf("stage: record the release of slot %d: %w", r.cur, err)
		}
		r.slots[r.cur].fence = f
	}
	i := r.next
	s := &r.slots[i]
	if s.fence != nil {
		if err := s.fence.wait(); err != nil {
			return 0, nil, fmt.Errorf("stage: wait for the readers of slot %d: %w", i, err)
		}
		s.fence = nil
	}
	if s.size < n {
		if err := r.release(s); err != nil {
			return 0, nil, err
		}
		size := max(n, 2*s.size, minStageSlot)
		a, err := r.mem.alloc(size)
		if err != nil {
			return 0, nil, fmt.Errorf("stage: allocate %d bytes for arguments: %w", size, err)
		}
		h, err := r.mem.allocHost(size)
		if err != nil {
			r.mem.free(a)
			return 0, nil, fmt.Errorf("stage: allocate %d bytes of pinned host memory for arguments: %w", size, err)
		}
		s.addr, s.host, s.size = a, h, size
	}
	r.cur, r.next = i, (i+1)%len(r.slots)
	return s.addr, s.host[:n], nil
}

// release frees slot s's buffers (no queued work reads them).
func (r *stageRing) release(s *stageSlot) error {
	var first error
	if s.addr != 0 {
		first = r.mem.free(s.addr)
	}
	if s.host != nil {
		if err := r.mem.freeHost(s.host); err != nil && first == nil {
			first = err
		}
	}
	s.addr, s.host, s.size = 0, nil, 0
	return first
}

// close waits for every slot's readers and frees the slots.
func (r *stageRing) close() error {
	var first error
	if r.cur >= 0 {
		f, err := r.mem.record()
		if err != nil {
			first = err
		}
		r.slots[r.cur].fence = f
	}
	for i := range r.slots {
		s := &r.slots[i]
		if s.fence != nil {
			if err := s.fence.wait(); err != nil && first == nil {
				first = err
			}
		}
		if err := r.release(s); err != nil && first == nil {
			first = err
		}
		*s = stageSlot{}
	}
	r.cur, r.next = -1, 0
	return first
}
