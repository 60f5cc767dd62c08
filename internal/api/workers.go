package api

import "time"

// Worker is a worker of the fleet as the registry knows it: a process
// that moves data on a hypervisor host or a proxy (`coffer worker`).
type Worker struct {
	Name string `json:"name"`
	Host string `json:"host"`
	// State is starting, ready, draining or lost.
	State string `json:"state"`
	// Slots are the tasks it runs at once; SlotsInUse those running now
	// (0 until the dispatcher grants slots to workers).
	Slots      int    `json:"slots"`
	SlotsInUse int    `json:"slots_in_use"`
	Version    string `json:"version"`  // coffer's
	Protocol   int    `json:"protocol"` // the fleet protocol it speaks
	// Epoch counts its registrations: the fence of its writes.
	Epoch         int64       `json:"epoch"`
	Reach         WorkerReach `json:"reach"`
	LastHeartbeat time.Time   `json:"last_heartbeat"`
	// AgeSeconds is how long ago the last heartbeat was, by the
	// answering process's clock.
	AgeSeconds   float64   `json:"age_seconds"`
	RegisteredAt time.Time `json:"registered_at"`
	// Credential is whether it has a worker token of its own (never the
	// token): none (it reaches the catalog with other credentials),
	// active, or revoked.
	Credential string `json:"credential"`
}

// NewWorkerToken is a created worker token: Token is the credential,
// shown this once; the catalog keeps only its PostgreSQL role's verifier.
type NewWorkerToken struct {
	Worker string `json:"worker"`
	// Role is the PostgreSQL login role the token logs in as.
	Role  string `json:"role"`
	Token string `json:"token"`
}

// WorkerTokenRevoked is what revoking a worker's token did.
type WorkerTokenRevoked struct {
	Worker string `json:"worker"`
	// Sessions is how many of its database sessions were ended.
	Sessions int `json:"sessions"`
	// Expired: the worker was registered; its heartbeat was expired so
	// that the servers declare it lost at their next look and re-admit
	// its running units.
	Expired bool `json:"expired"`
}

// WorkerReach is what a worker can get at: the work it can be given.
type WorkerReach struct {
	Connections  []string `json:"connections"`
	Hosts        []string `json:"hosts"`
	Datastores   []string `json:"datastores"`
	Libraries    []string `json:"libraries"`
	Repositories []string `json:"repositories"`
	CanBoot      bool     `json:"can_boot"` // it can run QEMU (boot verification)
}
