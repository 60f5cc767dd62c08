package backupcmd

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdBench() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "measure this machine for the planner",
		Long: command.Manual(`Measure what `+"`coffer plan`"+` predicts with: a device's throughput and
coffer's own pipeline. Results are recorded in the catalog with the host
and the date; the plan uses the newest of each.`, "See the subcommands.",
			"coffer bench device /srv/coffer --as repo:main\ncoffer bench pipeline", "0; 2 for bad flags."),
	}
	cmd.AddCommand(a.cmdBenchDevice(), a.cmdBenchPipeline())
	return cmd
}

func (a *app) cmdBenchDevice() *cobra.Command {
	var in api.DeviceBenchRequest
	var size string
	cmd := &cobra.Command{
		Use:   "device PATH",
		Short: "measure a device's sequential read, write and full-duplex throughput",
		Long: command.Manual(`Measure the device holding the directory PATH, as openBench measured with
Iometer: several sequential streams write a file (then fdatasync), read
it back (evicted from the page cache first), then read it while writing a
second one: a backup whose target shares the device or its controller
runs full-duplex, and a device must be judged by that figure. The data is
random and every block differs. Both files are removed.

--as names the device as the planner knows it: datastore:CONNECTION/DATASTORE
(a source datastore: the plan uses its full-duplex read) or repo:NAME (a
repository's target: its full-duplex write).`,
			`Read, write, and full-duplex read + write in MB/s (10^6 bytes/s).
--json: {device, path, host, time, streams, size_bytes,
read_bytes_per_second, write_bytes_per_second,
duplex_read_bytes_per_second, duplex_write_bytes_per_second}.`,
			`coffer bench device /srv/coffer --as repo:main
coffer bench device /vmfs/volumes/ds-7 --as datastore:vcenter/ds-7 --size 4GiB --streams 8`,
			"0; 2 for a path that is no directory or bad flags."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Path = args[0]
			if size != "" {
				n, err := command.ParseSize(size)
				if err != nil {
					return command.Usagef("--size: %v", err)
				}
				in.SizeBytes = n
			}
			doc, err := command.RunOp[*api.DeviceBench](cmd.Context(), a.App, "bench-device", &api.BenchDeviceInput{Body: in})
			if doc == nil {
				return err
			}
			return a.Emit(doc, err, func() {
				a.Printf("%s (%s on %s), %d streams of %s in all:\n", doc.Device, doc.Path, doc.Host, doc.Streams, command.HumanBytes(doc.SizeBytes))
				a.Printf("  read %.0f MB/s, write %.0f MB/s, both at once %.0f + %.0f MB/s\n", doc.ReadBytesPerSecond/1e6,
					doc.WriteBytesPerSecond/1e6, doc.DuplexReadBytesPerSecond/1e6, doc.DuplexWriteBytesPerSecond/1e6)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Device, "as", "", "the device's name for the planner: datastore:CONNECTION/DATASTORE or repo:NAME")
	f.StringVar(&size, "size", "256MiB", "bytes each pass moves")
	f.IntVar(&in.Streams, "streams", 4, "concurrent sequential streams")
	// Local only: PATH is a directory of this host, which the bench
	// measures; the server's bench-device measures one of its own.
	return command.Op(cmd, "bench-device")
}

func (a *app) cmdBenchPipeline() *cobra.Command {
	var in api.PipelineBenchRequest
	var size string
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "measure coffer's pipeline per core at each compression level",
		Long: command.Manual(`Measure what a backup does to every chunk after reading it (the keyed
BLAKE3 chunk ID, zstd at a level, AES-256-GCM) on all cores, at each
--level (0: no compression), on reproducible test data: three quarters
text-like, one quarter random. The plan uses the rate at the repository's
default level.

With --server it measures the server's host, as a task that answers at
once: its log gets the results (`+"`coffer job follow ID`"+`), and the plan
uses them once it has succeeded.`,
			`Per level: MB/s with all workers, MB/s per core, and the stored ratio on
the test data. --json: {host, time, levels: [{level, workers,
rate_bytes_per_second, per_core_bytes_per_second, stored_ratio}]}.
With --server: "task ID: measuring the server's pipeline", --json the
task's document (as `+"`coffer job show`"+` prints it).`,
			`coffer bench pipeline
coffer bench pipeline --level 1 --level 3 --size 1GiB
coffer --server https://backup:8443 bench pipeline --level 3`,
			"0; 2 for bad flags."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if size != "" {
				n, err := command.ParseSize(size)
				if err != nil {
					return command.Usagef("--size: %v", err)
				}
				in.SizeBytes = n
			}
			if a.Remote != nil {
				return a.startPipelineTask(cmd, in)
			}
			doc, err := command.RunOp[*api.PipelineBench](cmd.Context(), a.App, "bench-pipeline", &api.BenchPipelineInput{Body: in})
			if doc == nil {
				return err
			}
			return a.Emit(doc, err, func() {
				if a.Quiet {
					return
				}
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "LEVEL\tWORKERS\tMB/S\tMB/S PER CORE\tSTORED RATIO")
				for _, l := range doc.Levels {
					fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.0f\t%.3f\n", l.Level, l.Workers, l.RateBytesPerSecond/1e6, l.PerCoreBytesPerSecond/1e6, l.StoredRatio)
				}
				tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&in.Levels, "level", nil, "zstd levels to measure, 0 for none (repeatable; default 0, 1, 3, 9)")
	f.StringVar(&size, "size", "512MiB", "bytes each level processes")
	f.IntVar(&in.Workers, "workers", 0, "goroutines (default: one per core; at most 4 per core)")
	// Here it measures this host; with --server, the server's host, as a
	// task that answers at once.
	return command.RemoteToo(command.Op(cmd, "bench-pipeline", "start-bench-pipeline"))
}

// startPipelineTask starts the measurement on the server as a task and
// says how to follow it: a measurement can take longer than a request
// should be held open.
func (a *app) startPipelineTask(cmd *cobra.Command, in api.PipelineBenchRequest) error {
	j, err := command.RunOp[*api.Job](cmd.Context(), a.App, "start-bench-pipeline", &api.StartBenchPipelineInput{Body: in})
	if err != nil {
		return err
	}
	return a.Emit(j, nil, func() {
		a.Printf("task %d: measuring the server's pipeline (%s); follow it: coffer job follow %d\n", j.ID, j.Status, j.ID)
	})
}
