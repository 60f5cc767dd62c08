package actions

import "github.com/coffer-backup/coffer/internal/api"

// measurePipeline measures the server's pipeline (`coffer bench
// pipeline`: hash, compress, encrypt at each default level) as a task,
// which answers at once: the browser follows the task's page, whose log
// gets the results, and the plan uses them once it has succeeded.
func measurePipeline(p Page) {
	var j api.Job
	if err := p.Call("start-bench-pipeline", nil, nil, api.PipelineBenchRequest{}, &j); err != nil {
		p.Fail(err)
		return
	}
	p.Started(j.ID, nil, "")
}
