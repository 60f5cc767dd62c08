package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleCatalogExportsAndUndelete: on a repository in an S3 bucket
// that keeps versions, the Repositories page leads to the exports of the
// server's state: one made there is listed, as `coffer catalog exports`
// lists it, a second made with keep 1 deletes the first, and its page
// lists its tables. A snapshot manifest hidden behind a delete marker is
// brought back by Undelete, which names it, and S3 lists it again.
func TestConsoleCatalogExportsAndUndelete(t *testing.T) {
	srv := testutil.StartS3(t)
	bucket := srv.Bucket(t, true)
	l := newLab(t)
	for k, v := range srv.Env() {
		l.vars[k] = v
	}
	l.vars["COFFER_REPO"] = "s3://" + bucket + "/repo"
	img := l.ext4Image("disk", map[string][]byte{"etc/motd": []byte("exports\n")})
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/repositories")
	c.clickAway("#exports-default")
	c.waitText("#no-exports", "holds no export")
	c.run(chromedp.Click("#export-history"), chromedp.Click("#export-start"))
	c.waitText("#exported", "is made")
	first := exportIDs(t, l)
	if len(first) != 1 || c.count("#exports tbody tr") != 1 || !strings.Contains(c.text("#exports"), first[0]) {
		t.Fatalf("after one export the command line lists %v, the page:\n%s", first, c.text("#exports"))
	}
	c.run(chromedp.SendKeys("#export-keep", "1"), chromedp.Click("#export-start"))
	c.waitText("#exported", "1 older export deleted ("+first[0]+")")
	second := exportIDs(t, l)
	if len(second) != 1 || second[0] == first[0] || c.count("#exports tbody tr") != 1 {
		t.Fatalf("after an export keeping 1 the command line lists %v (first %v), the page %d rows", second, first, c.count("#exports tbody tr"))
	}
	c.shot("catalog-exports")
	c.clickAway("#exports a")
	c.waitText("#export-facts", "rows")
	if tables := c.text("#export-tables"); !strings.Contains(tables, "users") || !strings.Contains(tables, "audit") {
		t.Errorf("the export's page lists the tables:\n%s", tables)
	}
	c.shot("catalog-export")

	// A manifest hidden by a delete marker, as one allowed to delete
	// but not to break a lock would hide it.
	s3c := srv.Client()
	ctx := context.Background()
	list, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("repo/snapshots/")})
	if err != nil || len(list.Contents) == 0 {
		t.Fatalf("the repository's manifests: %v %v", list, err)
	}
	hidden := aws.ToString(list.Contents[0].Key)
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &hidden}); err != nil {
		t.Fatal(err)
	}
	c.open("/ui/repositories")
	c.run(chromedp.Click("#undelete-default"))
	c.waitText("#undeleted", "1 object brought back")
	if !strings.Contains(c.text("#undeleted"), strings.TrimPrefix(hidden, "repo/")) {
		t.Errorf("the undelete report does not name %s:\n%s", hidden, c.text("#undeleted"))
	}
	c.shot("undelete")
	if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &hidden}); err != nil {
		t.Errorf("%s after the console's undelete: %v", hidden, err)
	}
}

// exportIDs are the exports `coffer catalog exports` lists.
func exportIDs(t *testing.T, l *lab) []string {
	t.Helper()
	var es []api.CatalogExport
	if err := json.Unmarshal([]byte(l.coffer("catalog", "exports", "--json")), &es); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}
