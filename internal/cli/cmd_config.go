package cli

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/config"
)

func (a *app) cmdConfig() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "inspect the configuration"}
	show := &cobra.Command{
		Use:   "show",
		Short: "print every setting with its value and where it came from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type row struct {
				Key    string `json:"key"`
				Value  string `json:"value"`
				Source string `json:"source"`
			}
			var rows []row
			for _, name := range config.Names() {
				k, _ := config.Lookup(name)
				v, src := a.res.Get(name)
				if k.Secret && v != "" {
					v = "(set, hidden)"
				}
				rows = append(rows, row{name, v, string(src)})
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"file": a.file.Path, "settings": rows})
			}
			file := a.file.Path
			if file == "" {
				file = "(none)"
			}
			fmt.Fprintf(a.stdout, "configuration file: %s\n", file)
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tFROM")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Key, r.Value, r.Source)
			}
			return tw.Flush()
		},
	}
	keys := &cobra.Command{
		Use:   "keys",
		Short: "list every setting with its flag, environment variable and default",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.jsonOut {
				return a.printJSON(config.Keys)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FILE KEY\tFLAG\tENVIRONMENT\tDEFAULT\tMEANING")
			for _, k := range config.Keys {
				flag := ""
				if k.Flag != "" {
					flag = "--" + k.Flag
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Name, flag, k.Env, k.Default, k.Usage)
			}
			fmt.Fprintf(tw, "\nSections (each checked against its own schema when the file is read): %v\n", config.Sections)
			return tw.Flush()
		},
	}
	cmd.AddCommand(show, keys)
	return cmd
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
