package repo

// HealthIssue is damage the repository found and worked around while
// opening (a damaged config or key file copy): nothing is lost, and a
// repair rewrites the damaged object from an intact copy.
type HealthIssue struct {
	Kind   string `json:"kind"` // "config" or "key"
	Object string `json:"object"`
	Detail string `json:"detail"`
}

// Health lists what Open worked around.
func (r *Repository) Health() []HealthIssue { return append([]HealthIssue(nil), r.health...) }
