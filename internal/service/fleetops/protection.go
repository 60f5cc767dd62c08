package fleetops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/policy"
)

// DefaultRPO is how old a VM's newest point may be when none of its
// policies sets an rpo: a day, what a nightly schedule promises.
const DefaultRPO = 24 * time.Hour

// attentionShown is how many VMs that need a look a summary names.
const attentionShown = 10

// Ranks of a VM against its RPO, from the most in need of a look: the
// order of the inventory's attention listing.
const (
	rankNoPolicy = iota
	rankNoPoint
	rankOutsideRPO
	rankWithinRPO
)

var rankNames = [...]string{api.ProtectionNoPolicy, api.ProtectionNoPoint, api.ProtectionOutsideRPO, api.ProtectionWithinRPO}

// rpos are the recovery point objectives of the policies that set one.
type rpos map[string]time.Duration

func rposOf(cfg *policy.Config) rpos {
	out := rpos{}
	for _, p := range cfg.Policies {
		if p.RPO > 0 {
			out[p.Name] = time.Duration(p.RPO)
		}
	}
	return out
}

// of is the RPO of a VM that these policies select: the strictest of
// theirs (a VM two policies protect must meet both), or the default when
// none sets one.
func (r rpos) of(policies []string) time.Duration {
	_, rpo := r.strictest(policies)
	return rpo
}

// strictest is the policy whose RPO a VM these policies select is held
// to, and that RPO: the strictest of theirs, or the first policy and the
// default when none sets one.
func (r rpos) strictest(policies []string) (string, time.Duration) {
	name, strictest := "", time.Duration(0)
	for _, p := range policies {
		if d, ok := r[p]; ok && (strictest == 0 || d < strictest) {
			name, strictest = p, d
		}
	}
	if strictest == 0 {
		if len(policies) > 0 {
			name = policies[0]
		}
		return name, DefaultRPO
	}
	return name, strictest
}

// rank judges a VM: no policy, no point yet, a newest point older than
// its RPO, or within it.
func (r rpos) rank(policies []string, last, now time.Time) int {
	switch {
	case len(policies) == 0:
		return rankNoPolicy
	case last.IsZero():
		return rankNoPoint
	case now.Sub(last) > r.of(policies):
		return rankOutsideRPO
	}
	return rankWithinRPO
}

// judgedVM is a VM of the inventory with the policies of the
// configuration in effect that select it, its newest point's time and its
// rank against its RPO.
type judgedVM struct {
	rec      catalog.VMRecord
	policies []string
	last     time.Time
	rank     int
}

// judgeFleet judges every VM of the inventory that f selects and sees
// keeps (nil: every VM), in the inventory's order (connection, name, ID):
// the inventory's brief rows (what policies select by, not every VM's
// disks) and one grouped query for the newest point's time of every VM,
// instead of a lookup per VM. The judged VMs' records are brief:
// wholeRows reads the rest for those shown.
func judgeFleet(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, f catalog.InventoryFilter,
	sees func(connection, vm string) bool, now time.Time) ([]judgedVM, error) {
	f.Brief = true
	rows, err := cat.ListInventory(ctx, f)
	if err != nil {
		return nil, err
	}
	times, err := cat.NewestPointTimes(ctx)
	if err != nil {
		return nil, err
	}
	r := rposOf(cfg)
	out := make([]judgedVM, 0, len(rows))
	for _, row := range rows {
		if sees != nil && !sees(row.Connection, row.Name) {
			continue
		}
		pols := policiesSelecting(cfg, row.Connection, hypervisorVM(row))
		last := times[catalog.VMRef{Connection: row.Connection, ID: row.ID}]
		out = append(out, judgedVM{rec: row, policies: pols, last: last, rank: r.rank(pols, last, now)})
	}
	return out, nil
}

// wholeRowsBatch is how many VMs one query of wholeRows reads: a
// parameter each, well below every database's limit (a listing without a
// limit shows the whole fleet).
const wholeRowsBatch = 1000

// wholeRows replaces the brief records of judged VMs with their whole
// inventory rows (disks, power state...): one query for the VMs a page
// shows. A VM whose row went meanwhile (a refresh) keeps its brief one.
func wholeRows(ctx context.Context, cat catalog.Catalog, judged []judgedVM) error {
	if len(judged) == 0 {
		return nil
	}
	refs := make([]catalog.VMRef, len(judged))
	for i, j := range judged {
		refs[i] = catalog.VMRef{Connection: j.rec.Connection, ID: j.rec.ID}
	}
	whole := make(map[catalog.VMRef]catalog.VMRecord, len(refs))
	for batch := range slices.Chunk(refs, wholeRowsBatch) {
		rows, err := cat.ListInventory(ctx, catalog.InventoryFilter{VMs: batch})
		if err != nil {
			return err
		}
		for _, r := range rows {
			whole[catalog.VMRef{Connection: r.Connection, ID: r.ID}] = r
		}
	}
	for i, ref := range refs {
		if r, ok := whole[ref]; ok {
			judged[i].rec = r
		}
	}
	return nil
}

// byAttention orders judged VMs by rank, then as the inventory lists
// them.
func byAttention(a, b judgedVM) int {
	return cmp.Or(cmp.Compare(a.rank, b.rank), byName(a, b))
}

// ProtectionSummary counts the VMs of the inventory by how they stand
// against their RPO, and names the first that need a look: what the
// console's dashboard shows, without listing the fleet. Like VMs, it
// comes back with a partial error when a connection's inventory is
// missing or its last refresh failed. It counts the VMs the caller holds
// Conn.Audit on, and the states of the connections it sees something of.
func (s Ops) ProtectionSummary(ctx context.Context, in *api.ProtectionSummaryInput) (*api.ProtectionSummary, error) {
	sum, err := s.protectionSummary(ctx, in.Connections, sees(ctx, s))
	if sum == nil {
		return nil, err
	}
	sum.Connections, sum.Errors, err = seenConnections(ctx, s, sum.Connections, sum.Errors, err)
	return sum, err
}

// protectionSummary counts the VMs of the connections (every configured
// one when none is) that the caller sees (nil: every VM).
func (s Ops) protectionSummary(ctx context.Context, connections []string,
	sees func(connection, vm string) bool) (*api.ProtectionSummary, error) {
	cfg, names, err := s.inventoryConnections(ctx, connections)
	if err != nil {
		return nil, err
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, fmt.Errorf("the inventory is kept in the catalog: %w", err)
	}
	defer cat.Close()
	states, err := s.inventoryStates(ctx, cfg, cat, names, false)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	inv := inventoryHead(names, states, now)
	judged, err := judgeFleet(ctx, cfg, cat, catalog.InventoryFilter{Connections: names}, sees, now)
	if err != nil {
		return nil, err
	}
	r := rposOf(cfg)
	sum := &api.ProtectionSummary{Total: len(judged), DefaultRPOSeconds: DefaultRPO.Seconds(), PoliciesWithRPO: len(r),
		Attention: []api.VM{}, Connections: inv.Connections, Errors: inv.Errors}
	var attention []judgedVM
	for _, j := range judged {
		switch j.rank {
		case rankNoPolicy:
			sum.NoPolicy++
		case rankNoPoint:
			sum.NoPoint++
		case rankOutsideRPO:
			sum.OutsideRPO++
		default:
			sum.WithinRPO++
			continue
		}
		if len(attention) < attentionShown {
			attention = append(attention, j)
		}
	}
	if err := wholeRows(ctx, cat, attention); err != nil {
		return nil, err
	}
	if sum.Attention, err = vmDocs(ctx, cfg, cat, attention, now); err != nil {
		return nil, err
	}
	return sum, inventoryError(inv)
}

// attentionPage is a page of the inventory that judges every VM: only
// those that need a look when in says, by rank first when it asks for
// the attention order, after the cursor. The filters apply here, to the
// connections' whole inventory read once, so that the counts come with
// no second read.
func attentionPage(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, names []string, in vmsQuery,
	after catalog.VMCursor, afterRank int, now time.Time) ([]judgedVM, *api.InventoryCounts, error) {
	judged, err := judgeFleet(ctx, cfg, cat, catalog.InventoryFilter{Connections: names}, in.sees, now)
	if err != nil {
		return nil, nil, err
	}
	counts := &api.InventoryCounts{Total: len(judged)}
	judged = slices.DeleteFunc(judged, func(j judgedVM) bool {
		return !matches(j.rec, in) || (in.Attention && j.rank == rankWithinRPO)
	})
	counts.Matched = len(judged)
	order := byName
	if in.Order == OrderAttention {
		order = byAttention
	}
	slices.SortStableFunc(judged, order)
	if after != (catalog.VMCursor{}) {
		mark := judgedVM{rec: catalog.VMRecord{Connection: after.Connection, Name: after.Name, ID: after.ID}, rank: afterRank}
		i, found := slices.BinarySearchFunc(judged, mark, order)
		if found {
			i++
		}
		judged = judged[i:]
	}
	if in.Limit > 0 && len(judged) > in.Limit {
		judged = judged[:in.Limit]
	}
	if err := wholeRows(ctx, cat, judged); err != nil {
		return nil, nil, err
	}
	return judged, counts, nil
}

func byName(a, b judgedVM) int {
	return cmp.Or(cmp.Compare(a.rec.Connection, b.rec.Connection), cmp.Compare(a.rec.Name, b.rec.Name), cmp.Compare(a.rec.ID, b.rec.ID))
}

// matches applies ListVMsInput's filters as the catalog's ListInventory
// does (names compared in ASCII lower case, like SQL's lower).
func matches(r catalog.VMRecord, in vmsQuery) bool {
	switch in.Protection {
	case catalog.Protected:
		if !r.Protected {
			return false
		}
	case catalog.Unprotected:
		if r.Protected {
			return false
		}
	}
	return strings.Contains(asciiLower(r.Name), asciiLower(in.Name)) &&
		strings.Contains(asciiLower(r.Name+" "+r.Connection), asciiLower(in.Search))
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// vmDocs are judged VMs as the API shows them, each with its newest
// point: one grouped lookup for these VMs alone.
func vmDocs(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, judged []judgedVM, now time.Time) ([]api.VM, error) {
	refs := make([]catalog.VMRef, len(judged))
	for i, j := range judged {
		refs[i] = catalog.VMRef{Connection: j.rec.Connection, ID: j.rec.ID}
	}
	last := map[catalog.VMRef]catalog.BackupPoint{}
	if len(refs) > 0 {
		points, err := cat.NewestBackupPoints(ctx, refs)
		if err != nil {
			return nil, err
		}
		for _, p := range points {
			last[catalog.VMRef{Connection: p.Connection, ID: p.VMID}] = p
		}
	}
	r := rposOf(cfg)
	out := make([]api.VM, 0, len(judged))
	for _, j := range judged {
		d := vmDoc(j.rec, j.policies)
		if p, ok := last[catalog.VMRef{Connection: j.rec.Connection, ID: j.rec.ID}]; ok {
			d.LastPointID, d.LastBackup, d.LastMode, d.AgeSeconds = p.ID, p.Time, p.Mode, now.Sub(p.Time).Seconds()
		}
		d.Covered = len(d.Policies) > 0 && !d.LastBackup.IsZero()
		d.Protection = rankNames[r.rank(d.Policies, d.LastBackup, now)]
		d.RPOSeconds = r.of(d.Policies).Seconds()
		out = append(out, d)
	}
	return out, nil
}
