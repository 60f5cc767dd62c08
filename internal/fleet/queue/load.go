package queue

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"
)

// Load counts the jobs not yet finished (of any kind: VM units,
// operations) in the queues of the named workers: how busy each is, for
// choosing among workers that may all run a request's work
// (fleet.Remote.ChooseWorker). A worker absent from the map has none.
func (c *Client) Load(ctx context.Context, workers []string) (map[string]int, error) {
	byQueue := make(map[string]string, len(workers))
	var queues []string
	for _, w := range workers {
		q, err := WorkerQueue(w)
		if err != nil {
			return nil, err
		}
		byQueue[q] = w
		queues = append(queues, q)
	}
	out := map[string]int{}
	if len(queues) == 0 {
		return out, nil
	}
	params := river.NewJobListParams().Queues(queues...).States(unfinished...).First(1000)
	for {
		res, err := c.river.JobList(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("fleet: count the workers' unfinished jobs: %w", err)
		}
		for _, j := range res.Jobs {
			out[byQueue[j.Queue]]++
		}
		if len(res.Jobs) < 1000 {
			return out, nil
		}
		params = params.After(res.LastCursor)
	}
}
