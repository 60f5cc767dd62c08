package console

// The Connections page: the hypervisors coffer reaches, the file's and
// the API's, added, changed and deleted as page_config.go edits every
// kind. A connection's secrets stay in the files its options name
// (password-file), never in the form.

var connectionKinds = []configKind{
	{"connection", "connections", "Connections",
		"A hypervisor whose VMs coffer backs up: kind qemu (QMP sockets), libvirt (a libvirt URI) or vsphere (vCenter or one ESXi host), with the connector's options. A secret goes in a file the options name (password-file), never here.",
		"name: kvm1\nkind: libvirt\noptions: {uri: \"qemu:///system\"}\n", "/ui/connections"},
}

// connections lists the connections with their sources, and the form.
func (p *page) connections() { p.configPage(connectionKinds, "connections", "Connections") }
