package console_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestConsoleMediaLabelAndCatalog: a point copied to tape with another
// catalog is not in the server's media catalogue. On the Media page a
// blank cartridge is labelled into a pool, as the API then lists it; the
// catalogue rebuilt from the library's volumes lists the copied volume in
// its pool with its segment, the labelled one, and skips the blank one,
// as the API lists them afterwards.
func TestConsoleMediaLabelAndCatalog(t *testing.T) {
	l := newLab(t)
	img := l.ext4Image("disk", map[string][]byte{"etc/motd": []byte("to tape\n")})
	tapes := filepath.Join(l.dir, "vtl")
	l.config("media-libraries:\n  - {name: tapes, kind: vtl, directory: " + tapes + "}\n")
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	l.coffer("media", "vtl", "create", tapes, "--drives", "1", "--slots", "4", "--capacity", "32MiB")
	for i, barcode := range []string{"CFR001L8", "CFR002L8", "CFR003L8"} {
		l.coffer("media", "vtl", "add", tapes, barcode, "--slot", string(rune('1'+i)))
	}
	serverCatalog := l.vars["COFFER_CATALOG"]
	l.vars["COFFER_CATALOG"] = filepath.Join(l.dir, "elsewhere.db")
	var copied api.MediaCopyResult
	if err := json.Unmarshal([]byte(l.coffer("media", "copy", "--library", "tapes", "--pool", "weekly", "--json")), &copied); err != nil || len(copied.Volumes) != 1 {
		t.Fatalf("the copy to tape: %+v %v", copied, err)
	}
	written := copied.Volumes[0].Barcode
	l.vars["COFFER_CATALOG"] = serverCatalog
	blank := "CFR003L8"
	if written == blank {
		blank = "CFR002L8"
	}
	label := map[string]bool{"CFR001L8": true, "CFR002L8": true, "CFR003L8": true}
	delete(label, written)
	delete(label, blank)
	var labelled string
	for b := range label {
		labelled = b
	}
	l.start()
	c := l.chrome()
	c.firstRun()
	tok := l.adminToken()
	volumes := func() []api.MediaVolume {
		var vols []api.MediaVolume
		if code := l.get(tok, "/api/v1/media/volumes", &vols); code != 200 {
			t.Fatalf("volumes: %d", code)
		}
		return vols
	}

	c.open("/ui/media")
	c.waitText("#no-volumes", "no volume")
	c.run(chromedp.Click("#label-tapes summary"), chromedp.SetValue("#l-barcode-tapes", labelled),
		chromedp.SendKeys("#l-pool-tapes", "monthly"), chromedp.Click("#label-start-tapes"))
	c.waitText("#labelled-tapes", "Cartridge "+labelled+" is labelled into the pool monthly")
	if vols := volumes(); len(vols) != 1 || vols[0].Barcode != labelled || vols[0].Pool != "monthly" {
		t.Fatalf("the API's volumes after the console labelled %s: %+v", labelled, vols)
	}
	c.shot("media-label")

	c.run(chromedp.Click("#catalog-tapes summary"), chromedp.Click("#catalog-start-tapes"))
	c.waitText("#catalogued-tapes", "holds 2 volumes of tapes now")
	got := c.text("#catalogued-tapes")
	if !strings.Contains(got, written+" (weekly, 1 segment)") || !strings.Contains(got, labelled+" (monthly, 0 segments)") || !strings.Contains(got, blank) {
		t.Fatalf("the rebuilt catalogue (written %s, labelled %s, blank %s): %q", written, labelled, blank, got)
	}
	c.shot("media-catalog")
	vols := volumes()
	if i := slices.IndexFunc(vols, func(v api.MediaVolume) bool { return v.Barcode == written }); len(vols) != 2 || i < 0 || vols[i].Pool != "weekly" || vols[i].Segments != 1 {
		t.Fatalf("the API's volumes after the rebuild: %+v", vols)
	}
}
