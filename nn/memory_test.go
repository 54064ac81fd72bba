package nn

import "testing"

// DeviceMemory grows linearly in the replicas (every buffer but the shared ones is per
// replica), grows with the rows, and refuses counts below one.
func TestDeviceMemoryShape(t *testing.T) {
	spec := LeNet5(10, false)
	at := func(R, train, eval int) int64 {
		t.Helper()
		v, err := DeviceMemory(spec, R, train, eval)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b, c := at(2, 16, 32), at(4, 16, 32), at(6, 16, 32)
	if b-a != c-b || b <= a {
		t.Errorf("values at 2, 4, 6 replicas: %d, %d, %d: not linear and increasing", a, b, c)
	}
	if at(2, 16, 64) <= a || at(2, 8, 32) > a {
		t.Errorf("more evaluation rows must cost more, fewer training rows no more")
	}
	for _, bad := range [][3]int{{0, 16, 32}, {2, 0, 32}, {2, 16, 0}} {
		if _, err := DeviceMemory(spec, bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("DeviceMemory(%v): no error", bad)
		}
	}
}
