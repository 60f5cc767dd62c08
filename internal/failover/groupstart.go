package failover

import "time"

// maxGroupStarts is how many VMs of a group start at once. A group is
// the VMs an operator wants up together (Veeam's failover plans start up
// to 10 VMs at once); the bound keeps a group of a hundred VMs from
// creating every overlay and launching every QEMU at the same instant.
const maxGroupStarts = 8

// stepBuf holds one VM's steps while its start runs beside others', to
// be handed to the report in plan order.
type stepBuf []Step

func (b *stepBuf) step(group int, vm, name string, began time.Time, err error, detail string) {
	*b = append(*b, newStep(group, vm, name, began, err, detail))
}

// startGroup runs start(i) for each of the count VMs of a group at once,
// at most maxGroupStarts at a time, and returns once every one ended.
// ended(i) runs on the caller's goroutine, in plan order: VM i's as soon
// as it and every VM before it have ended, whatever order the starts end
// in. So the report and its watcher, which only ended touches, read the
// same order every run, and still follow the run as it goes. A start
// that fails does not stop the others, already on their way: the caller
// stops the plan after the group.
func startGroup(count int, start func(i int), ended func(i int)) {
	done := make([]chan struct{}, count)
	for i := range done {
		done[i] = make(chan struct{})
	}
	slots := make(chan struct{}, maxGroupStarts)
	go func() { // a goroutine of its own: ended(0) need not wait for the last slot
		for i := range count {
			slots <- struct{}{}
			go func() {
				defer func() { <-slots; close(done[i]) }()
				start(i)
			}()
		}
	}()
	for i := range count {
		<-done[i]
		ended(i)
	}
}
