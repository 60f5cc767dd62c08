package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

// TestConsolePointsPaged: the points pages list the catalog a page at a
// time with the API's keyset cursor. A VM with 121 points (one backed up,
// 120 more recorded in the catalog beside it) shows 50, 50 and 21 as the
// operator follows "Older", newest first, each point once; "Newest" goes
// back to the first page; the repository's page is paged the same way.
func TestConsolePointsPaged(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	img := l.ext4Image("web-disk", map[string][]byte{"etc/motd": []byte("paged\n")})
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	cat, err := catalogopen.Open(ctx, l.vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	real, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{Limit: 10})
	if err != nil || len(real) != 1 {
		t.Fatalf("the catalog's points after one backup: %+v %v", real, err)
	}
	const extra = 120
	var older []catalog.BackupPoint
	for i := range extra {
		sum := sha256.Sum256(fmt.Appendf(nil, "point %d", i))
		older = append(older, catalog.BackupPoint{Repository: real[0].Repository, ID: hex.EncodeToString(sum[:]),
			Time: real[0].Time.Add(-time.Duration(i+1) * time.Hour), VMName: "files", Mode: "disk", Disks: 1,
			BytesLogical: 16 << 20, BytesStored: 1 << 20, SnapshotModeAchieved: "none"})
	}
	if err := cat.PutBackupPoints(ctx, older); err != nil {
		t.Fatal(err)
	}
	_ = cat.Close()
	l.start()
	c := l.chrome()
	c.firstRun()

	rows := func(table string) []string {
		var ids []string
		c.run(chromedp.Evaluate(`[...document.querySelectorAll("`+table+` tbody tr a[href*='/p/'] code")].map(e => e.innerText)`, &ids))
		return ids
	}
	c.open("/ui/points/default/vm/files")
	var seen []string
	for page, want := range []int{50, 50, 21} {
		ids := rows("#points")
		if len(ids) != want {
			t.Fatalf("page %d shows %d points, want %d", page+1, len(ids), want)
		}
		seen = append(seen, ids...)
		if page == 0 {
			c.shot("points-paged")
		}
		if page < 2 {
			c.follow("#older")
		}
	}
	var gone bool
	c.run(chromedp.Evaluate(`!document.querySelector("#older")`, &gone))
	if !gone {
		t.Fatal("the last page offers older points")
	}
	if seen[0] != real[0].ID[:len(seen[0])] {
		t.Fatalf("the first point shown is %s, not the newest, %s", seen[0], real[0].ID)
	}
	want := []string{real[0].ID[:len(seen[0])]}
	for _, p := range older {
		want = append(want, p.ID[:len(seen[0])])
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("the pages showed %d points, not each of the 121 once, newest first:\n%v", len(seen), seen)
	}
	c.follow("#newest")
	if ids := rows("#points"); len(ids) != 50 || ids[0] != seen[0] {
		t.Fatalf("Newest shows %d points from %v", len(ids), ids[:min(1, len(ids))])
	}

	// The repository's page: the newest points of every source, paged.
	c.open("/ui/points/default")
	if ids := rows("#recent"); len(ids) != 50 || ids[0] != seen[0] {
		t.Fatalf("the repository's first page shows %d points", len(ids))
	}
	c.follow("#older")
	if ids := rows("#recent"); len(ids) != 50 || ids[0] != seen[50] {
		t.Fatalf("the repository's second page shows %d points", len(ids))
	}
	// A VM found by name opens its pages.
	c.open("/ui/points/default")
	c.run(chromedp.SendKeys("#find-vm", "files"))
	c.clickAway("#find-vm-go")
	if loc := c.location(); loc != l.srv.url+"/ui/points/default/vm/files" {
		t.Fatalf("finding files opened %s", loc)
	}
}

// follow goes where a link leads (a pager's, which the next page has
// too, so clickAway cannot wait for it to go): the browser navigates to
// its target as a click would.
func (c *chrome) follow(sel string) {
	c.t.Helper()
	var href string
	c.run(chromedp.WaitVisible(sel), chromedp.Evaluate(`document.querySelector(`+jsString(sel)+`).href`, &href))
	c.run(chromedp.Navigate(href), chromedp.WaitReady("body"))
}
