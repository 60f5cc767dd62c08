package queue

// Heard is the submitter's listener connection a Submitted was taken
// under (0: none): WaitSubmitted trusts the notices only then.
func Heard(s Submitted) uint64 { return s.heard }
