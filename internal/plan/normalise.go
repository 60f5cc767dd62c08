package plan

// A VM's recorded costs are samples taken at several concurrencies: the
// calibration runs, or a policy's nights at whatever limits.tasks was.
// Their plain mean and deviation mix the load each was recorded at,
// which the growth fitted to the runs (growth.go) already models (a
// transfer of 0.15 s alone took 1.6 s beside 11 others), with the VM's
// own variance. Summarised raw, the concurrency effect is drawn a second
// time as per-VM variance: with samples at 1, 4 and 12 in flight a VM's
// coefficient of variation came out near 0.85, and a simulated run of
// 24 VMs at once ended with the slowest of 24 such draws, 2 to 3 times
// the mean (the QEMU and S3 fleets were planned twice as long as they
// took). So each sample is first divided by the growth's factor at the
// load its task ran at, which takes it to one task in flight, and the
// mean and deviation are taken of those; the simulation scales them
// back from one in flight to each phase's concurrency (Task.Load = 1).
// Without a fitted growth the factor is 1 and the samples are used as
// recorded.
//
// The deviation left still holds how whole runs differed (a busy night),
// which the run-to-run factor draws again; it is not taken out here,
// because a run's ratio to the fit also reflects which VMs it held (a
// run of fulls moves more bytes per second than one of incrementals),
// and dividing by it would move one VM's cost by its neighbours'.

// costSample is one recorded duration in seconds, with the load its task
// ran at (the mean number of VM tasks in flight over its life; 0: not
// known, its run's mean load is taken) and its run's index in
// History.Runs.
type costSample struct {
	seconds, load float64
	run           int
}

// normaliser takes samples to one task in flight by one growth (the
// fixed costs' or the transfers').
type normaliser struct {
	growth  CostGrowth
	runLoad []float64 // by run index
}

func newNormaliser(g CostGrowth, runs []RunRecord) normaliser {
	n := normaliser{growth: g, runLoad: make([]float64, len(runs))}
	for i, r := range runs {
		n.runLoad[i] = r.Load
	}
	return n
}

// alone is the sample's cost at one task in flight.
func (n normaliser) alone(s costSample) float64 {
	load := s.load
	if load <= 0 {
		load = n.runLoad[s.run]
	}
	if load <= 0 {
		return s.seconds
	}
	return s.seconds / n.growth.Factor(load)
}

// dist is the mean and deviation of the samples taken alone.
func (n normaliser) dist(samples []costSample) Dist {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = n.alone(s)
	}
	return distOf(xs)
}
