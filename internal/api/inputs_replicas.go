package api

// ListReplicasInput lists the standbys replications keep.
type ListReplicasInput struct {
	Replication string `query:"replication" maxLength:"255" doc:"only this replication's standbys"`
	VM          string `query:"vm" maxLength:"255" doc:"only this VM's standbys"`
}

// RunReplicationInput brings a replication's standbys to their VMs'
// newest backup points.
type RunReplicationInput struct {
	WorkerParam
	Name string `path:"name" minLength:"1" maxLength:"255" example:"web-dr" doc:"the replication"`
	VM   string `query:"vm" maxLength:"255" doc:"only this VM's standby (default: every VM the replication names)"`
}
