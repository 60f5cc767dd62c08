package engine

import (
	"fmt"
	"testing"
)

// BenchmarkDispatchWithWorkers is the leader's dispatch per VM under
// bench/fleetscale's shape: 1,000 VMs queued on two connections (one
// host-bound) over 3 hosts and 6 datastores, 3 workers of 2 slots, limits
// tasks 5, per-host 2, per-datastore 2, per-repository 4. Each iteration
// is one unit done and its VM queued again: the pump that follows looks
// at every queued unit, since the repository's streams, not the global
// pool, bind.
func BenchmarkDispatchWithWorkers(b *testing.B) {
	d := newDispatcher(5)
	var ws []Worker
	for i := 1; i <= 3; i++ {
		ws = append(ws, Worker{Name: fmt.Sprintf("w%d", i), Slots: 2,
			Reach: Reach{Connections: []string{"kvm", "sim"}, Hosts: []string{fmt.Sprintf("kvm/host-%02d", i)}}})
	}
	if err := d.setWorkers(ws); err != nil {
		b.Fatal(err)
	}
	repo := d.resource("repo:default", 4)
	started := make(chan *unit, 1024)
	var units []*unit
	for i := range 1000 {
		conn, host, ds := "sim", fmt.Sprintf("host-%02d", i%3+1), fmt.Sprintf("ds-%03d", i%6+1)
		rt := &Route{Connection: conn, Repository: "default"}
		if i%2 == 0 {
			conn = "kvm"
			rt = &Route{Connection: conn, Hosts: []string{host}, Repository: "default"}
		}
		u := &unit{needs: needsOf(d.global, d.resource("host:"+conn+"/"+host, 2), d.resource("datastore:"+conn+"/"+ds, 2), repo),
			size: int64(i % 7), route: rt, vm: fmt.Sprintf("%s/vm-%04d", conn, i), run: func(u *unit) { started <- u }}
		units = append(units, u)
	}
	d.submit(units...)
	b.ResetTimer()
	for range b.N {
		u := <-started
		d.done(u)
		d.submit(u)
	}
}
