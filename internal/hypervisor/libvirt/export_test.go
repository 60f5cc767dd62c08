package libvirt

// SetCrashPoint lets the crash tests' child processes die at a step.
func SetCrashPoint(f func(step string)) { crashPoint = f }
