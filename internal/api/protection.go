package api

// How a VM stands against its recovery point objective (VM.Protection),
// from the most in need of a look to the least.
const (
	ProtectionNoPolicy   = "no-policy"   // no policy selects it
	ProtectionNoPoint    = "no-point"    // a policy selects it, it has no point yet
	ProtectionOutsideRPO = "outside-rpo" // its newest point is older than its RPO
	ProtectionWithinRPO  = "within-rpo"  // its newest point is within its RPO
)

// ProtectionSummary is the fleet's protection at a glance, each VM the
// caller sees judged against its RPO: the strictest rpo of the policies
// that select it, or DefaultRPOSeconds when none sets one.
type ProtectionSummary struct {
	Total      int `json:"total"`
	WithinRPO  int `json:"within_rpo"`
	OutsideRPO int `json:"outside_rpo"`
	NoPoint    int `json:"no_point"`
	NoPolicy   int `json:"no_policy"`
	// DefaultRPOSeconds is what a VM whose policies set no rpo is held
	// to; PoliciesWithRPO counts the policies that set one.
	DefaultRPOSeconds float64 `json:"default_rpo_seconds"`
	PoliciesWithRPO   int     `json:"policies_with_rpo"`
	// Attention is the first VMs that need a look (not within their
	// RPO), by connection, name and ID: at most ten.
	Attention   []VM              `json:"attention"`
	Connections []InventoryState  `json:"connections"`
	Errors      []ConnectionError `json:"errors"`
}

// InventoryCounts counts a listing of the inventory that judged every VM
// (list-vms with order=attention or attention=true).
type InventoryCounts struct {
	Total   int `json:"total"`   // the VMs of the connections asked for
	Matched int `json:"matched"` // those the filters keep, on every page
}
