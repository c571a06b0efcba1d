package testkit

import "runtime"

// LiveHeap returns the bytes of heap in use right after two garbage
// collections (the second one frees what the first one's finalizers
// released): the live heap, for tests that bound what a structure holds.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
