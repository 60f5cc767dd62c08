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

// FailoverInput runs an operation of a failover plan (test, failover,
// planned failover, failback) on its VMs, or on one of them.
type FailoverInput struct {
	WorkerParam
	Name string `path:"name" minLength:"1" maxLength:"255" example:"shop" doc:"the failover plan"`
	VM   string `query:"vm" maxLength:"255" doc:"only this VM of the plan (default: every VM, group by group)"`
	Seq  int    `query:"seq" minimum:"0" doc:"the standbys' restore point to start from, by sequence number (coffer replicas points); 0: the newest"`
	To   string `query:"to" maxLength:"4096" doc:"failback only: a failback to a new location, each VM's disks written whole as new files in TO/VM (through the API: a path relative to the server's restore directory); the original disks are not touched"`
}

// FailoverRunsInput asks for a failover plan's recent runs.
type FailoverRunsInput struct {
	Name  string `path:"name" minLength:"1" maxLength:"255" example:"shop" doc:"the failover plan"`
	Limit int    `query:"limit" minimum:"0" maximum:"100" doc:"the most runs, newest first (0: 10)"`
}
