package restorecmd_test

import (
	"errors"
	"io"
	"syscall"
	"testing"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

// This kernel has no NFS client: the vSphere instant tests read the
// export as ESXi would find it, with the client library
// github.com/willscott/go-nfs-client.

// dialRPC connects the client library to addr. The library binds a
// random local port of its own choosing, which may be taken, so a bind
// refused with "address already in use" is tried again.
func dialRPC(t *testing.T, addr string) *rpc.Client {
	t.Helper()
	for i := 0; ; i++ {
		c, err := rpc.DialTCP("tcp", addr, false)
		if err == nil {
			return c
		}
		if !errors.Is(err, syscall.EADDRINUSE) || i == 20 {
			t.Fatalf("dial %s: %v", addr, err)
		}
	}
}

// getport asks the portmapper on host's port 111 where MOUNT version 3
// listens over TCP, as ESXi does before it mounts.
func getport(t *testing.T, host string) int {
	t.Helper()
	c := dialRPC(t, host+":111")
	defer c.Close()
	port, err := (&rpc.Portmapper{Client: c}).Getport(rpc.Mapping{Prog: 100005, Vers: 3, Prot: rpc.IPProtoTCP})
	if err != nil {
		t.Fatalf("GETPORT: %v", err)
	}
	return port
}

// readExported mounts the export at addr and reads file name.
func readExported(t *testing.T, addr, name string) string {
	t.Helper()
	c := dialRPC(t, addr)
	defer c.Close()
	m := &nfsc.Mount{Client: c}
	target, err := m.Mount("/", rpc.AuthNull)
	if err != nil {
		t.Fatalf("mount %s: %v", addr, err)
	}
	defer func() { _ = m.Unmount() }()
	f, err := target.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}
