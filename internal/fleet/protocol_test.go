package fleet_test

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// TestOneProtocol: the registry's protocol and the hand-off's are one
// number, so that a worker admitted at registration never meets a job it
// would misread.
func TestOneProtocol(t *testing.T) {
	if fleet.Protocol != queue.ProtocolVersion {
		t.Fatalf("fleet.Protocol %d, queue.ProtocolVersion %d", fleet.Protocol, queue.ProtocolVersion)
	}
}
