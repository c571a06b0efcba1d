package presence

import (
	"testing"
	"unsafe"
)

// TestLayoutIsCompact: the records held per session have no padding to
// spare (issue 23: bytes per idle session). On a 64-bit platform only.
func TestLayoutIsCompact(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for a 64-bit platform")
	}
	for _, tc := range []struct {
		name       string
		size, want uintptr
	}{
		{"Conn", unsafe.Sizeof(Conn{}), 64},
		{"Session", unsafe.Sizeof(Session{}), 312},
		{"SessionView", unsafe.Sizeof(SessionView{}), 160}, // the 160-byte size class, not 176
		{"User", unsafe.Sizeof(User{}), 504},               // Dormant by pointer: the 512-byte size class, not 896
		{"Wanted", unsafe.Sizeof(Wanted{}), 216},           // held in the tracker's slot
	} {
		if tc.size > tc.want {
			t.Errorf("%s is %d bytes, want at most %d", tc.name, tc.size, tc.want)
		}
	}
}
