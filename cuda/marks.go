//go:build gpu

package cuda

import (
	"errors"
	"fmt"

	"github.com/fedaudit/fedaudit/cuda/internal/drv"
)

var _ EventTimer = (*device)(nil)

// Mark implements EventTimer: a timing event recorded on the backend's stream, taken from the
// free ones or made.
func (d *device) Mark() (Mark, error) {
	leave, err := d.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	var ev drv.Event
	if n := len(d.timing); n > 0 {
		ev, d.timing = d.timing[n-1], d.timing[:n-1]
	} else if ev, err = drv.NewTimingEvent(); err != nil {
		return nil, fmt.Errorf("make timing event: %w", err)
	}
	if err := ev.Record(d.stream); err != nil {
		d.timing = append(d.timing, ev)
		return nil, fmt.Errorf("record timing event: %w", err)
	}
	return &eventMark{d: d, ev: ev}, nil
}

// eventMark is a recorded timing event of a device.
type eventMark struct {
	d  *device
	ev drv.Event
}

func (m *eventMark) Since(earlier Mark) (float64, error) {
	e, ok := earlier.(*eventMark)
	if !ok || e.d != m.d {
		return 0, errors.New("marks of different devices")
	}
	leave, err := m.d.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	if err := m.ev.Synchronize(); err != nil {
		return 0, fmt.Errorf("wait for timing event: %w", err)
	}
	ms, err := drv.Elapsed(e.ev, m.ev)
	if err != nil {
		return 0, fmt.Errorf("elapsed time: %w", err)
	}
	return float64(ms) / 1e3, nil
}

func (m *eventMark) Release() error {
	m.d.timing = append(m.d.timing, m.ev)
	return nil
}
