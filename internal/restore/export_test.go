package restore

// SetPlanWindow lets tests plan a disk in small windows; it returns the
// function that restores the default.
func SetPlanWindow(n uint64) (restore func()) {
	old := planWindow
	planWindow = n
	return func() { planWindow = old }
}

// SetAfterBatch makes f run after every batch a restore writes; it returns
// the function that removes it.
func SetAfterBatch(f func()) (restore func()) {
	afterBatch = f
	return func() { afterBatch = nil }
}
