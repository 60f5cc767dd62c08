package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqldump"
)

// The tables an export takes, whole, in and out (catalog.Dumper): the
// suite every SQL catalog runs for issue 39's recovery of the server.

// RunDump runs the dump tests: each gets its own databases from newDB.
func RunDump(t *testing.T, newDB Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newDB Factory)
	}{
		{"EveryTableIsDeclared", testEveryTableIsDeclared},
		{"DumpLoadRoundTrip", testDumpLoadRoundTrip},
		{"LoadRefusesANonEmptyCatalog", testLoadRefusesNonEmpty},
		{"BrokenLoadLosesNothing", testBrokenLoadLosesNothing},
		{"DumpIsOneSnapshot", testDumpIsOneSnapshot},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newDB) })
	}
}

func dumper(t *testing.T, c catalog.Catalog) catalog.Dumper {
	t.Helper()
	d, isSQL := sqldump.Of(c)
	if !isSQL {
		t.Fatalf("%T is not an SQL catalog", c)
	}
	return d
}

// testEveryTableIsDeclared: every table of the migrated schema is
// exported or says why not (catalog.Tables), and every declared table
// exists. A migration that adds a table fails here until it is declared.
func testEveryTableIsDeclared(t *testing.T, newDB Factory) {
	c := mustOpen(t, newDB(t))
	tables, err := dumper(t, c).SchemaTables(context.Background())
	ok(t, err)
	for _, name := range tables {
		d, declared := catalog.Table(name)
		switch {
		case !declared:
			t.Errorf("table %s is neither exported nor declared rebuildable or transient: declare it in internal/catalog/tables.go, with the reason", name)
		case d.Why == "":
			t.Errorf("table %s is declared %s without a reason", name, d.Fate)
		}
	}
	for _, d := range catalog.Tables {
		if !slices.Contains(tables, d.Name) {
			t.Errorf("table %s is declared (%s) but the schema has no such table", d.Name, d.Fate)
		}
	}
}

// Dumper is the dumper of an SQL catalog (sqldump.Of).
func Dumper(t *testing.T, c catalog.Catalog) catalog.Dumper { return dumper(t, c) }

// Dump is a dump held in memory: the tables as written, rows copied.
type Dump struct {
	Tables []DumpTable
	next   int
	row    int
}

// DumpTable is one table of a Dump.
type DumpTable struct {
	Name    string
	Columns []string
	Rows    [][]any
}

func (d *Dump) Table(name string, columns []string) error {
	d.Tables = append(d.Tables, DumpTable{Name: name, Columns: slices.Clone(columns)})
	return nil
}

func (d *Dump) Row(values []any) error {
	t := &d.Tables[len(d.Tables)-1]
	t.Rows = append(t.Rows, slices.Clone(values))
	return nil
}

// Reader reads the dump from its start.
func (d *Dump) Reader() (catalog.DumpReader, error) {
	return &Dump{Tables: d.Tables}, nil
}

func (d *Dump) NextTable() (string, []string, error) {
	if d.next >= len(d.Tables) {
		return "", nil, io.EOF
	}
	d.next++
	d.row = 0
	t := d.Tables[d.next-1]
	return t.Name, t.Columns, nil
}

func (d *Dump) NextRow() ([]any, error) {
	t := d.Tables[d.next-1]
	if d.row >= len(t.Rows) {
		return nil, nil
	}
	d.row++
	return t.Rows[d.row-1], nil
}

// Rows returns the rows of table, nil when the dump lacks it.
func (d *Dump) Rows(table string) [][]any {
	for _, t := range d.Tables {
		if t.Name == table {
			return t.Rows
		}
	}
	return nil
}

func dumpOf(t *testing.T, c catalog.Catalog, tables []string) *Dump {
	t.Helper()
	d := &Dump{}
	_, err := dumper(t, c).Dump(context.Background(), tables, d)
	ok(t, err)
	return d
}

// Populate writes a row or more into every exported table, and the
// history, through the catalog's own methods.
func Populate(t *testing.T, c catalog.Catalog) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ok(t, c.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		if err := tx.InsertUser(ctx, catalog.User{Name: "alice", PasswordHash: "$argon2id$v=19$m=65536,t=3,p=2$c2FsdA$aGFzaA",
			Enabled: true, CreatedAt: now, PasswordChangedAt: now}); err != nil {
			return err
		}
		if err := tx.InsertAPIToken(ctx, catalog.APIToken{ID: "tok1", User: "alice", SecretSHA256: "ab12",
			Comment: "ci", CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
			return err
		}
		if err := tx.PutACL(ctx, catalog.ACLEntry{Path: "/policies/nightly", User: "alice", Role: "Operator", Propagate: true}); err != nil {
			return err
		}
		if err := tx.PutTOTP(ctx, catalog.TOTPSecret{User: "alice", Sealed: "v1:sealed", CreatedAt: now, ConfirmedAt: now}); err != nil {
			return err
		}
		if err := tx.ReplaceRecoveryCodes(ctx, "alice", []catalog.RecoveryCode{{User: "alice", CodeSHA256: "c1", CreatedAt: now}}); err != nil {
			return err
		}
		if err := tx.InsertWebAuthnCredential(ctx, catalog.WebAuthnCredential{ID: "Y3JlZA", User: "alice", Name: "key 1",
			Credential: []byte(`{"id":"x"}`), CreatedAt: now}); err != nil {
			return err
		}
		return tx.PutACL(ctx, catalog.ACLEntry{Path: "/", User: "alice", TokenID: "tok1", Role: "Auditor"})
	}))
	ok(t, c.AppendAudit(ctx, []catalog.AuditRecord{{Time: now, User: "alice", Operation: "login", Result: catalog.AuditOK,
		Detail: `quotes " and 'é' and a\nnewline`}}))
	ok(t, c.UpdateConfig(ctx, func(tx catalog.ConfigTx) error {
		_, err := tx.CreateConfigObject(ctx, catalog.ConfigObject{Kind: "policy", Name: "nightly",
			Spec: []byte(`{"connection":"lab","retention":{"daily":7}}`), CreatedBy: "alice"})
		return err
	}))
	_, err := c.AddNotification(ctx, &catalog.NotificationEvent{Time: now, Type: "job-failed", Severity: "error",
		Object: "/policies/nightly", Title: "nightly failed", Data: []byte(`{"job":1}`)}, []string{"ops", "pager"})
	ok(t, err)
	ok(t, c.ReplaceMediaVolume(ctx, catalog.MediaVolume{Barcode: "A1", Library: "/vtl", Pool: "weekly", MediaSet: "s1",
		BlockSize: 262144, Labelled: now, Full: true, WORM: true}, []catalog.MediaSegment{{Barcode: "A1", Session: "s1",
		Stream: 1, Point: "p1", VM: "web", Repository: "r1", PointTime: now, FirstSeq: 0, LastSeq: 9, Bytes: 1000,
		End: true, Extents: []catalog.MediaExtent{{Pos: 5, Count: 10}}}}))
	_, err = c.ClaimRun(ctx, "forget-nightly", now.Truncate(time.Hour), "server-1", now)
	ok(t, err)
	if u, isUsage := c.(catalog.Usage); isUsage {
		ok(t, u.AddUsageSample(ctx, catalog.UsageSample{Repository: "r1", At: now, StoredBytes: 1 << 30, CapacityBytes: 1 << 40}))
	}
	j := &catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "nightly", Status: catalog.StatusSuccess, CreatedAt: now,
		StartedAt: now, FinishedAt: now.Add(time.Minute), Progress: catalog.Progress{BytesPerSecond: 1.5e8}}
	ok(t, c.CreateJob(ctx, j))
	tasks := []*catalog.Task{{JobID: j.ID, VMID: "vm-1", VMName: "web", Status: catalog.StatusSuccess, Datastores: []string{"ds1"}}}
	ok(t, c.CreateTasks(ctx, tasks))
	ok(t, c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, TaskID: tasks[0].ID, Level: "info", Kind: "disk-done",
		Message: "disk done", Fields: map[string]any{"mbps": 150.5}}}))
}

// testDumpLoadRoundTrip: what a dump of a catalog loads into a new one
// dumps the same, and reads back the same through the catalog's methods;
// new rows get new IDs after the loaded ones.
func testDumpLoadRoundTrip(t *testing.T, newDB Factory) {
	ctx := context.Background()
	src, dst := mustOpen(t, newDB(t)), mustOpen(t, newDB(t))
	Populate(t, src)
	tables := catalog.ExportedTables(true)
	d := dumpOf(t, src, tables)
	for _, name := range tables {
		if len(d.Rows(name)) == 0 {
			t.Errorf("table %s: no row dumped: Populate should write one", name)
		}
	}
	ok(t, dumper(t, dst).Load(ctx, tables, d.Reader, false))
	same(t, "dump of the loaded catalog", dumpOf(t, dst, tables).Tables, d.Tables)

	users, err := dst.ListUsers(ctx)
	ok(t, err)
	wantUsers, err := src.ListUsers(ctx)
	ok(t, err)
	same(t, "users", users, wantUsers)
	tok, err := dst.GetAPIToken(ctx, "tok1")
	ok(t, err)
	wantTok, err := src.GetAPIToken(ctx, "tok1")
	ok(t, err)
	same(t, "token", tok, wantTok)
	acl, err := dst.ListACL(ctx, catalog.ACLFilter{})
	ok(t, err)
	wantACL, err := src.ListACL(ctx, catalog.ACLFilter{})
	ok(t, err)
	same(t, "ACL", acl, wantACL)
	objs, gen, err := dst.ListConfigObjects(ctx)
	ok(t, err)
	wantObjs, wantGen, err := src.ListConfigObjects(ctx)
	ok(t, err)
	same(t, "configuration objects", objs, wantObjs)
	same(t, "configuration generation", gen, wantGen)
	audit, err := dst.ListAudit(ctx, catalog.AuditFilter{})
	ok(t, err)
	wantAudit, err := src.ListAudit(ctx, catalog.AuditFilter{})
	ok(t, err)
	same(t, "audit log", audit, wantAudit)

	// The identities go on after the loaded rows.
	ok(t, dst.AppendAudit(ctx, []catalog.AuditRecord{{Operation: "login", Result: catalog.AuditOK}}))
	after, err := dst.ListAudit(ctx, catalog.AuditFilter{Limit: 1})
	ok(t, err)
	if after[0].ID <= wantAudit[0].ID {
		t.Fatalf("audit record appended after the load has ID %d, not past the loaded %d", after[0].ID, wantAudit[0].ID)
	}
	j := &catalog.Job{Kind: catalog.KindBackupPolicy}
	ok(t, dst.CreateJob(ctx, j))
	if j.ID <= 1 {
		t.Fatalf("job created after the load has ID %d, a loaded job's", j.ID)
	}
}

// testLoadRefusesNonEmpty: a load over a catalog that holds state is
// refused and changes nothing, unless it replaces.
func testLoadRefusesNonEmpty(t *testing.T, newDB Factory) {
	ctx := context.Background()
	src, dst := mustOpen(t, newDB(t)), mustOpen(t, newDB(t))
	Populate(t, src)
	tables := catalog.ExportedTables(false)
	d := dumpOf(t, src, tables)
	ok(t, dst.AppendAudit(ctx, []catalog.AuditRecord{{Operation: "login", Result: catalog.AuditOK, User: "bob"}}))
	before := dumpOf(t, dst, tables)
	err := dumper(t, dst).Load(ctx, tables, d.Reader, false)
	if !errors.Is(err, catalog.ErrNotEmpty) {
		t.Fatalf("load over a catalog with an audit record: %v, want ErrNotEmpty", err)
	}
	same(t, "catalog after a refused load", dumpOf(t, dst, tables).Tables, before.Tables)
	ok(t, dumper(t, dst).Load(ctx, tables, d.Reader, true))
	same(t, "catalog after a replacing load", dumpOf(t, dst, tables).Tables, d.Tables)
}

// brokenDump fails after a number of rows, as a damaged export would.
type brokenDump struct {
	catalog.DumpReader
	rows int
}

func (b *brokenDump) NextRow() ([]any, error) {
	if b.rows--; b.rows < 0 {
		return nil, errors.New("part 2 of the export is damaged")
	}
	return b.DumpReader.NextRow()
}

// testBrokenLoadLosesNothing: a dump that breaks halfway loads nothing,
// even when it was to replace the catalog's rows.
func testBrokenLoadLosesNothing(t *testing.T, newDB Factory) {
	ctx := context.Background()
	src, dst := mustOpen(t, newDB(t)), mustOpen(t, newDB(t))
	Populate(t, src)
	ok(t, dst.AppendAudit(ctx, []catalog.AuditRecord{{Operation: "login", Result: catalog.AuditOK, User: "bob"}}))
	tables := catalog.ExportedTables(true)
	d := dumpOf(t, src, tables)
	before := dumpOf(t, dst, tables)
	for _, replace := range []bool{false, true} {
		err := dumper(t, dst).Load(ctx, tables, func() (catalog.DumpReader, error) {
			r, _ := d.Reader()
			return &brokenDump{DumpReader: r, rows: 5}, nil
		}, replace)
		if err == nil {
			t.Fatalf("a broken dump loaded (replace %v)", replace)
		}
		same(t, fmt.Sprintf("catalog after a broken load (replace %v)", replace), dumpOf(t, dst, tables).Tables, before.Tables)
	}
}

// testDumpIsOneSnapshot: dumps taken while other handles write see each
// write whole or not at all, across tables: a configuration object and
// the generation it took, a job's log and the job's count of lines.
func testDumpIsOneSnapshot(t *testing.T, newDB Factory) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := newDB(t)
	reader, writer := mustOpen(t, open), mustOpen(t, open)
	j := &catalog.Job{Kind: catalog.KindBackupPolicy}
	ok(t, writer.CreateJob(ctx, j))
	// The tables are dumped in the order that would tear: the objects
	// before the generation, the events after the job.
	tables := []string{"config_objects", "jobs", "config_generation", "events"}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for i := 0; gctx.Err() == nil; i++ {
			err := writer.UpdateConfig(gctx, func(tx catalog.ConfigTx) error {
				_, err := tx.CreateConfigObject(gctx, catalog.ConfigObject{Kind: "policy", Name: fmt.Sprint("p", i), Spec: []byte(`{}`)})
				return err
			})
			if err == nil {
				err = writer.AddEvents(gctx, []catalog.Event{{JobID: j.ID, Level: "info", Kind: "line"}})
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		defer cancel()
		for range 20 {
			d := &Dump{}
			if _, err := dumper(t, reader).Dump(gctx, tables, d); err != nil {
				return err
			}
			if err := checkSnapshot(d); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// checkSnapshot checks the invariants the writers of testDumpIsOneSnapshot
// keep in every transaction.
func checkSnapshot(d *Dump) error {
	objects := int64(len(d.Rows("config_objects")))
	gen := d.Rows("config_generation")[0][1]
	if gen != objects {
		return fmt.Errorf("torn dump: %d configuration objects, generation %v", objects, gen)
	}
	jobs := d.Rows("jobs")
	col := slices.Index(d.Tables[1].Columns, "log_lines")
	if lines, events := jobs[0][col], int64(len(d.Rows("events"))); lines != events {
		return fmt.Errorf("torn dump: the job counts %v log lines, its log has %d", lines, events)
	}
	return nil
}
