// Package par runs a loop's contiguous ranges concurrently, and the one
// reduction several packages need that way (the largest of a slice, under
// a mask): the helpers the packages with parallel loops share. Its Helper
// shares work too short to wait for a goroutine to wake, started ahead
// and polling until the work is handed over, and its Once makes what
// such work shares once, its waiters polling rather than parked.
package par
