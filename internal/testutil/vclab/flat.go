package vclab

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/vmware/govmomi/vim25/mo"
)

// FlatPath is where vcsim keeps the flat extent of the disk file
// "[ds] dir/name.vmdk".
func (l *Lab) FlatPath(file string) string {
	ds, rel, _ := strings.Cut(strings.TrimPrefix(file, "["), "] ")
	var dss []mo.Datastore
	l.Retrieve(context.Background(), "Datastore", []string{"name", "summary"}, &dss)
	for _, d := range dss {
		if d.Name == ds {
			u, _ := url.Parse(d.Summary.Url)
			return filepath.Join(u.Path, strings.TrimSuffix(rel, ".vmdk")+"-flat.vmdk")
		}
	}
	return ""
}
