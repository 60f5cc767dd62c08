package mediacmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/service/mediaops"
)

// coffer media load and unload: the changer's moves an operator makes by
// hand (mtx load, mtx unload), on a library by its name, virtual or real.

func (a *app) cmdMediaLoad() *cobra.Command {
	var in api.MediaLoadInput
	cmd := &cobra.Command{
		Use:   "load --library LIB [--drive N] BARCODE",
		Short: "load a cartridge into a drive (as mtx load, by barcode)",
		Long: command.Manual(`Move a cartridge, named by its barcode, into the library's drive: the
drive's cartridge, if it holds another, goes back to its slot first, and a
cartridge another drive holds is taken back from it (a real drive is
ejected before the robot takes its cartridge). Copies, restores and
verifies load what they need themselves.`,
			`The library's status after the move, as mtx status prints it. --json: the status document.`,
			`coffer media load --library robot --drive 1 CFR003L8`,
			"0; 7 for a cartridge the library does not hold; 4 while another operation drives the library."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Body.Barcode = args[0]
			res, err := runMedia(cmd.Context(), a, "media-load", &in, mediaops.MediaHere{}, mediaops.Ops.MediaLoad)
			return a.emitStatus(res, err)
		},
	}
	libraryFlags(cmd, &in.Library, &in.Drive)
	return command.RemoteToo(command.Op(cmd, "media-load"))
}

func (a *app) cmdMediaUnload() *cobra.Command {
	var in api.DriveParam
	cmd := &cobra.Command{
		Use:   "unload --library LIB [--drive N]",
		Short: "return a drive's cartridge to its slot (as mtx unload)",
		Long: command.Manual(`Move the cartridge in the library's drive back to the slot it came from. A
real drive is ejected first (st's offline), as most changers need.`,
			`The library's status after the move, as mtx status prints it. --json: the status document.`,
			`coffer media unload --library robot --drive 1`,
			"0; 2 for an empty drive; 4 while another operation drives the library."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runMedia(cmd.Context(), a, "media-unload", &in, mediaops.MediaHere{}, mediaops.Ops.MediaUnload)
			return a.emitStatus(res, err)
		},
	}
	libraryFlags(cmd, &in.Library, &in.Drive)
	return command.RemoteToo(command.Op(cmd, "media-unload"))
}

// emitStatus prints a library's status as mtx status does.
func (a *app) emitStatus(res *api.MediaLibraryStatus, err error) error {
	if res == nil {
		return err
	}
	return a.Emit(res, err, func() { a.Printf("%s", media.FormatMtxStatus(res.Library, changerStatus(res))) })
}
