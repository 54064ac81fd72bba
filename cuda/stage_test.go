package cuda

import (
	"errors"
	"testing"
)

// fakeQueue is a device work queue: launches are numbered in issue order and finish in that
// order; the device is behind by however many the test says, and a fence's wait catches up.
type fakeQueue struct {
	issued, done int
	next         uint64
	live         map[uint64]int
	readers      []reader // launches that read a staged slot
	waits        int
	failWait     bool
	hostLive     int
}

type reader struct {
	addr uint64
	n    int // launch number
}

type fakeFence struct {
	q *fakeQueue
	n int
}

func (f fakeFence) wait() error {
	if f.q.failWait {
		return errors.New("device fault")
	}
	if f.q.done < f.n {
		f.q.waits++
		f.q.done = f.n
	}
	return nil
}

func (q *fakeQueue) alloc(n int) (uint64, error) {
	q.next += 1 << 20
	q.live[q.next] = n
	return q.next, nil
}

func (q *fakeQueue) free(a uint64) error {
	if _, ok := q.live[a]; !ok {
		return errors.New("free of a freed slot")
	}
	for _, r := range q.readers {
		if r.addr == a && r.n > q.done {
			return errors.New("slot freed while a queued launch reads it")
		}
	}
	delete(q.live, a)
	return nil
}

func (q *fakeQueue) record() (fence, error) { return fakeFence{q, q.issued}, nil }

func (q *fakeQueue) allocHost(n int) ([]byte, error) {
	q.hostLive++
	return make([]byte, n), nil
}

func (q *fakeQueue) freeHost([]byte) error {
	q.hostLive--
	return nil
}

// launch issues a kernel reading addr; the device stays lag launches behind.
func (q *fakeQueue) launch(addr uint64, lag int) {
	q.issued++
	q.readers = append(q.readers, reader{addr, q.issued})
	q.done = max(q.done, q.issued-lag)
}

// A slot is never handed out (or freed, when it grows) while a queued launch still reads it,
// however far behind the device is; with the device no more than slots-1 stages behind, no take
// waits; every address differs from the previous slots-1 ones.
func TestStageRingNeverReusesAQueuedSlot(t *testing.T) {
	for _, c := range []struct {
		slots, lag, wantWaits int
		grow                  bool
	}{
		{slots: 4, lag: 0, wantWaits: 0},
		{slots: 4, lag: 3, wantWaits: 0},
		{slots: 4, lag: 10, wantWaits: -1}, // waits: some
		{slots: 1, lag: 2, wantWaits: -1},
		{slots: 3, lag: 5, grow: true, wantWaits: -1},
	} {
		q := &fakeQueue{live: map[uint64]int{}}
		r := newStageRing(q, c.slots)
		var last []uint64
		var lastHost [][]byte
		for i := 0; i < 50; i++ {
			n := 100
			if c.grow {
				n = minStageSlot * (1 + i/10)
			}
			a, h, err := r.take(n)
			if err != nil {
				t.Fatalf("%+v: take %d: %v", c, i, err)
			}
			if q.live[a] < n || len(h) != n {
				t.Fatalf("%+v: take %d: slot of %d bytes (host %d) for %d", c, i, q.live[a], len(h), n)
			}
			// The host half is the slot's own too: no other slot of the last slots-1 takes
			// shares its memory.
			for _, p := range lastHost {
				if &p[0] == &h[0] {
					t.Fatalf("%+v: take %d: pinned buffer reused within %d takes", c, i, c.slots)
				}
			}
			if lastHost = append(lastHost, h); len(lastHost) > c.slots-1 {
				lastHost = lastHost[1:]
			}
			for _, rd := range q.readers {
				if rd.addr == a && rd.n > q.done {
					t.Fatalf("%+v: take %d: slot %#x handed out while launch %d (device done to %d) reads it", c, i, a, rd.n, q.done)
				}
			}
			for _, p := range last {
				if p == a {
					t.Fatalf("%+v: take %d: address reused within %d takes", c, i, c.slots)
				}
			}
			if last = append(last, a); len(last) > c.slots-1 {
				last = last[1:]
			}
			q.launch(a, c.lag)
			q.launch(a, c.lag) // two kernels read one stage
		}
		if c.wantWaits >= 0 && q.waits != c.wantWaits {
			t.Errorf("%+v: %d waits, want %d", c, q.waits, c.wantWaits)
		}
		if c.wantWaits < 0 && q.waits == 0 {
			t.Errorf("%+v: no wait although the device is %d launches behind", c, c.lag)
		}
		if err := r.close(); err != nil {
			t.Fatalf("%+v: close: %v", c, err)
		}
		if len(q.live) != 0 || q.hostLive != 0 {
			t.Errorf("%+v: %d slots, %d pinned buffers not freed", c, len(q.live), q.hostLive)
		}
	}
}

// A device fault surfacing at a fence is returned by take, naming the slot.
func TestStageRingReportsFenceErrors(t *testing.T) {
	q := &fakeQueue{live: map[uint64]int{}}
	r := newStageRing(q, 1)
	a, _, err := r.take(10)
	if err != nil {
		t.Fatal(err)
	}
	q.launch(a, 1)
	q.failWait = true
	if _, _, err := r.take(10); err == nil {
		t.Fatal("take succeeded after a failed wait")
	}
}
