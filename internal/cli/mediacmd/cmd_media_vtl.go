package mediacmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/mediaops"
)

func (a *app) cmdMediaVTL() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vtl",
		Short: "manage a file-backed virtual tape library",
		Long: command.Manual(`A virtual tape library is a directory: library.json (elements and cartridges)
and one file per cartridge. Its drives behave as Linux st drives (records,
filemarks, the early-warning end of medium), its changer as mtx.`, "See the subcommands.",
			`coffer media vtl create /srv/vtl --slots 8 --capacity 64MiB
coffer media vtl add /srv/vtl CFR001L8 --slot 1`,
			"That of the subcommand."),
	}
	var in mediaops.VTLCreateInput
	var capacity, rateS string
	create := &cobra.Command{
		Use:   "create DIR",
		Short: "create a virtual tape library",
		Long: command.Manual(`Create a virtual tape library in DIR (created if needed), with empty slots:
add cartridges with coffer media vtl add. --rate models a drive's streaming
rate and --reposition-time the cost of every locate (for measurements; with
--throttle the drives take that time for real).`,
			`"created ..."`, `coffer media vtl create /srv/vtl --slots 8 --capacity 64MiB`, "0; 2 for a directory already holding a library."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Dir = args[0]
			var err error
			if in.Capacity, err = command.ParseSize(capacity); err != nil {
				return command.Usagef("--capacity: %v", err)
			}
			if rateS != "" {
				if in.Rate, err = command.ParseSize(rateS); err != nil {
					return command.Usagef("--rate: %v", err)
				}
			}
			if _, err := command.Call(a.App, func(s *service.Service) (struct{}, error) {
				return struct{}{}, (mediaops.Ops{Service: s}).CreateVTL(in)
			}); err != nil {
				return err
			}
			a.Printf("created a virtual tape library in %s: %d drive(s), %d slot(s), cartridges of %s\n", in.Dir, in.Drives, in.Slots, command.HumanBytes(in.Capacity))
			return nil
		},
	}
	f := create.Flags()
	f.IntVar(&in.Drives, "drives", 1, "drives")
	f.IntVar(&in.Slots, "slots", 8, "storage slots")
	f.IntVar(&in.ImportExport, "import-export", 1, "import/export slots")
	f.StringVar(&capacity, "capacity", "64MiB", "capacity of a cartridge")
	f.StringVar(&rateS, "rate", "", "a drive's rate per second (e.g. 300MB; default: not modelled)")
	f.DurationVar(&in.RepositionTime, "reposition-time", 0, "the fixed cost of a locate")
	f.BoolVar(&in.Throttle, "throttle", false, "make the drives take the modelled time")

	var slot int
	var worm bool
	var cartCapacity string
	add := &cobra.Command{
		Use:   "add DIR BARCODE --slot N",
		Short: "add a blank cartridge to a virtual tape library",
		Long: command.Manual(`Put a new blank cartridge with this barcode into an empty slot (an
operator inserting one). --worm makes it write-once: appended to, never
overwritten.`, `"added ..."`, `coffer media vtl add /srv/vtl CFR001L8 --slot 1`, "0; 2 for a used barcode or a full slot."),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c int64
			if cartCapacity != "" {
				var err error
				if c, err = command.ParseSize(cartCapacity); err != nil {
					return command.Usagef("--capacity: %v", err)
				}
			}
			if _, err := command.Call(a.App, func(s *service.Service) (struct{}, error) {
				return struct{}{}, mediaops.Ops{Service: s}.AddVTLCartridge(args[0], args[1], slot, worm, c)
			}); err != nil {
				return err
			}
			a.Printf("added %s to slot %d\n", args[1], slot)
			return nil
		},
	}
	add.Flags().IntVar(&slot, "slot", 0, "the empty slot to put it in")
	add.Flags().BoolVar(&worm, "worm", false, "a WORM cartridge")
	add.Flags().StringVar(&cartCapacity, "capacity", "", "its capacity (default: the library's)")

	var lin api.LibraryParam
	var here mediaops.MediaHere
	status := &cobra.Command{
		Use:   "status --library LIB",
		Short: "show a library's slots and drives (as mtx status)",
		Long: command.Manual(`Show the changer's inventory: drives, storage and import/export slots,
barcodes.`, `The mtx status text. --json: {library, kind, drives: [{index, full, barcode,
source_slot, worm}], slots: [{number, import_export, full, barcode, worm}]}.`, `coffer media vtl status --library /srv/vtl`, "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runMedia(cmd.Context(), a, "media-library-status", &lin, here, mediaops.Ops.MediaLibraryStatus)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() { a.Printf("%s", media.FormatMtxStatus(res.Library, changerStatus(res))) })
		},
	}
	libraryFlags(status, &lin.Library, &here.Drive)
	const why = "manages a virtual tape library's files on this host"
	cmd.AddCommand(command.FaceOnly(create, why), command.FaceOnly(add, why), command.RemoteToo(command.Op(status, "media-library-status")))
	return cmd
}

// changerStatus is a library's status as mtx status prints it.
func changerStatus(doc *api.MediaLibraryStatus) *media.ChangerStatus {
	st := &media.ChangerStatus{}
	for _, d := range doc.Drives {
		st.Drives = append(st.Drives, media.DriveElement{Index: d.Index, Full: d.Full, SourceSlot: d.SourceSlot, VolumeTag: d.Barcode})
	}
	for _, sl := range doc.Slots {
		st.Slots = append(st.Slots, media.SlotElement{Number: sl.Number, Full: sl.Full, ImportExport: sl.ImportExport, VolumeTag: sl.Barcode})
	}
	return st
}
