package cuda

import (
	"errors"

	"github.com/fedaudit/fedaudit/compute"
)

// ErrNotBuilt is returned by NewBackend in builds without the gpu tag.
var ErrNotBuilt = errors.New("this build has no GPU backend (build with -tags gpu)")

// Engine is what a caller needs from the GPU backend beyond compute.Backend.
type Engine interface {
	compute.Backend
	// Err is the first device error (out of memory, a failed launch); every operation after
	// it does nothing, so results are valid only while Err is nil.
	Err() error
	// Close releases the device memory and the context, even after an error, and returns the
	// first error (Err's) joined with any met while releasing (see the Device doc).
	Close() error
	// Name describes the device.
	Name() string
	// FreeMemory returns the device's free and total memory in bytes.
	FreeMemory() (free, total int64, err error)
	// FreeAll frees every buffer and leaves the backend usable (Ops.FreeAll).
	FreeAll() error
	// Profile is the device time per kind of operation when profiling is on (Ops.Profile).
	Profile() ([]OpTime, error)
}

// Available reports whether this build has the GPU backend.
func Available() bool { return available }

// DeviceCount returns the number of GPUs the driver sees, or ErrNotBuilt.
func DeviceCount() (int, error) { return deviceCount() }

// NewBackend opens the GPU backend on the given device ordinal, or returns ErrNotBuilt.
func NewBackend(device int) (Engine, error) { return newBackend(device) }
