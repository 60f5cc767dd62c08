package job

import "time"

// ListeningForLines reports whether the watcher listens for the notices
// of lines.
func (m *Manager) ListeningForLines() bool { return m.linesOn.Load() }

// NoticesHeard counts the notices the watcher heard: of lines (log,
// progress), and the others.
func (m *Manager) NoticesHeard() (lines, others int64) {
	return m.heard.lines.Load(), m.heard.others.Load()
}

// SetLineLinger sets how long the watcher listens for lines after the
// last subscription ends, until the test ends.
func SetLineLinger(t interface{ Cleanup(func()) }, d time.Duration) {
	prev := lineLinger
	lineLinger = d
	t.Cleanup(func() { lineLinger = prev })
}
