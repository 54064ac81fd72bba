//go:build gpu

package cuda

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

const available = true

// Backend is compute.Backend on one GPU: Ops over the device. Buffers live in device
// memory until Close; the engine allocates every replica's state once, so a shard of pairs
// must fit in device memory (see docs/gpu.md for the sizes and FreeMemory to check).
type Backend struct {
	*Ops
	dev *device
}

var _ Engine = (*Backend)(nil)

// New opens device ordinal device (0 for the first GPU) with the default launch options.
func New(device int) (*Backend, error) { return NewWithOptions(device, Options{}) }

// NewWithOptions is New with the given launch options (results do not depend on them).
func NewWithOptions(device int, opt Options) (*Backend, error) {
	d, err := openDevice(device)
	if err != nil {
		return nil, err
	}
	return &Backend{Ops: NewOps(d, opt), dev: d}, nil
}

func newBackend(device int) (Engine, error) { return New(device) }

// Name describes the device.
func (b *Backend) Name() string { return b.dev.name }

// Sync waits until the device has done all the work issued so far and returns the first
// error, including asynchronous ones (a kernel fault surfaces here or at the next copy).
func (b *Backend) Sync() error {
	if err := b.Err(); err != nil {
		return err
	}
	if err := b.dev.Sync(); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}

// FreeMemory returns the free and total device memory in bytes.
func (b *Backend) FreeMemory() (free, total int64, err error) { return b.dev.memInfo() }

// Close frees every buffer and releases the device, even after an error; the backend must not
// be used afterwards. It waits for the device first, so an asynchronous fault surfaces here if
// not before, and returns the first error (Err's) joined with any met while releasing (the
// contract of the Device doc, the same as Ops.Close on the host shim).
func (b *Backend) Close() error {
	err := b.Ops.Close()
	return errors.Join(err, b.dev.close())
}

func deviceCount() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("cuda: count devices: %w", err)
	}
	return n, nil
}
