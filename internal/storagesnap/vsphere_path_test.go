package storagesnap

import "testing"

// TestRelPathOnVSphereDatastore: a vSphere disk's file is found in a
// storage snapshot by its path on its datastore, never outside it.
func TestRelPathOnVSphereDatastore(t *testing.T) {
	for file, want := range map[string]string{
		"[gold 01] web/web.vmdk":   "web/web.vmdk",
		"[gold 01] web/../db.vmdk": "db.vmdk",
		"[gold 02] web/web.vmdk":   "",
		"[gold 01] ../web.vmdk":    "",
		"[gold 01] /etc/passwd":    "",
		"/srv/vms/web.qcow2":       "",
	} {
		rel, err := relPath("[gold 01]", file)
		if rel != want || (err == nil) != (want != "") {
			t.Errorf("relPath(%q) = %q, %v; want %q", file, rel, err, want)
		}
	}
	if f := imageFormat("vmdk-flat"); f != "vmdk" {
		t.Errorf("a vSphere flat disk is read as %q through QEMU, want vmdk (its descriptor)", f)
	}
}
