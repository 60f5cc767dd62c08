package api

// The inputs of the operations on the VM inventory (see inputs.go).

// ListVMsInput selects a page of the inventory's VMs.
type ListVMsInput struct {
	Connections []string `query:"connection,explode" required:"false" maxItems:"100" doc:"only these connections (repeat the parameter)"`
	Protection  string   `query:"protection" enum:"protected,unprotected" doc:"protected: VMs a policy selects; unprotected: VMs none does"`
	Name        string   `query:"name" maxLength:"255" doc:"VMs whose name contains this, ignoring ASCII case"`
	Search      string   `query:"search" maxLength:"255" doc:"VMs whose name, a space and connection contain this, ignoring ASCII case"`
	Order       string   `query:"order" enum:"attention" doc:"attention: the VMs that need a look first (no policy, no point, a point older than their RPO), then by connection, name and ID"`
	Attention   bool     `query:"attention" doc:"only the VMs that need a look (the page then carries counts)"`
	Limit       int      `query:"limit" minimum:"0" maximum:"1000" doc:"the page's size, by connection, name and ID (0: 100)"`
	After       string   `query:"after" maxLength:"2048" doc:"the Coffer-Next header of the previous page: this page continues after it"`
}

// ProtectionSummaryInput selects the VMs the protection summary counts.
type ProtectionSummaryInput struct {
	Connections []string `query:"connection,explode" required:"false" maxItems:"100" doc:"only these connections (repeat the parameter)"`
}
