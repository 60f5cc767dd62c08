package catalogexport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// ErrDamaged: a part of the export is missing, altered or cut short, or
// the parts do not add up to what the manifest lists.
var ErrDamaged = errors.New("the export is damaged")

// ErrSchema: the export was made with another schema than the catalog's.
var ErrSchema = errors.New("the export's catalog schema is not this catalog's")

// ImportOptions tune an import.
type ImportOptions struct {
	// ID is the export to import; "" for the newest.
	ID string
	// Force replaces the rows of a catalog that is not empty (its other
	// tables are left as they are).
	Force bool
}

// Import loads an export into the catalog in one transaction: a broken
// export (a part missing, damaged or altered) imports nothing and the
// catalog keeps what it had, forced or not. It refuses, with
// catalog.ErrNotEmpty, a catalog that already holds exported state unless
// forced.
func Import(ctx context.Context, d catalog.Dumper, r *repo.Repository, o ImportOptions) (Manifest, error) {
	var m Manifest
	var err error
	if o.ID == "" {
		m, err = Newest(ctx, r)
	} else {
		m, err = Get(ctx, r, o.ID)
	}
	if err != nil {
		return Manifest{}, err
	}
	schema, err := d.SchemaVersion(ctx)
	if err != nil {
		return Manifest{}, err
	}
	if m.Schema != schema {
		return Manifest{}, fmt.Errorf("export %s has schema version %d, this catalog %d: %w (import it with the coffer that made it, version %s, then upgrade)",
			m.ID, m.Schema, schema, ErrSchema, m.Coffer)
	}
	tables := m.TableNames()
	for _, t := range tables {
		if decl, ok := catalog.Table(t); !ok || (decl.Fate != catalog.Exported && decl.Fate != catalog.History) {
			return Manifest{}, fmt.Errorf("export %s holds table %s, which this coffer does not import", m.ID, t)
		}
	}
	err = d.Load(ctx, tables, func() (catalog.DumpReader, error) {
		return &partReader{ctx: ctx, r: r, m: m, counts: map[string]int64{}}, nil
	}, o.Force)
	if err != nil {
		return Manifest{}, fmt.Errorf("import export %s: %w", m.ID, err)
	}
	return m, nil
}

// partReader reads an export's parts in order, each checked against the
// manifest, as one dump.
type partReader struct {
	ctx    context.Context
	r      *repo.Repository
	m      Manifest
	next   int    // the part to read when buf is used up
	name   string // the part being read
	buf    []byte
	pos    int
	table  string
	cols   []string
	peeked *header
	counts map[string]int64
}

// line returns the next line, reading the next part when the current one
// is used up; io.EOF after the last part.
func (p *partReader) line() ([]byte, error) {
	for p.pos >= len(p.buf) {
		if p.next == len(p.m.Parts) {
			return nil, io.EOF
		}
		if err := p.load(p.m.Parts[p.next]); err != nil {
			return nil, err
		}
		p.next++
	}
	end := bytes.IndexByte(p.buf[p.pos:], '\n')
	if end < 0 {
		return nil, fmt.Errorf("part %s: %w: its last line is cut short", p.name, ErrDamaged)
	}
	l := p.buf[p.pos : p.pos+end]
	p.pos += end + 1
	return l, nil
}

func (p *partReader) load(part PartInfo) error {
	b, err := p.r.CatalogExportObject(p.ctx, p.m.ID, part.Name)
	if err != nil {
		return fmt.Errorf("part %s: %w: %w", part.Name, ErrDamaged, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != part.SHA256 || int64(len(b)) != part.Bytes {
		return fmt.Errorf("part %s: %w: not the part the manifest lists (SHA-256 or size differs)", part.Name, ErrDamaged)
	}
	p.name, p.buf, p.pos = part.Name, b, 0
	return nil
}

func (p *partReader) parse(l []byte) (*header, []any, error) {
	h, row, err := parseLine(l)
	if err != nil {
		return nil, nil, fmt.Errorf("part %s: %w: %w", p.name, ErrDamaged, err)
	}
	return h, row, nil
}

func (p *partReader) NextTable() (string, []string, error) {
	h := p.peeked
	p.peeked = nil
	if h == nil {
		l, err := p.line()
		if errors.Is(err, io.EOF) {
			return "", nil, p.checkCounts()
		}
		if err != nil {
			return "", nil, err
		}
		var row []any
		if h, row, err = p.parse(l); err != nil {
			return "", nil, err
		}
		if row != nil {
			return "", nil, fmt.Errorf("part %s: %w: a row before any table", p.name, ErrDamaged)
		}
	}
	if _, seen := p.counts[h.Table]; seen {
		return "", nil, fmt.Errorf("part %s: %w: table %s again after other tables", p.name, ErrDamaged, h.Table)
	}
	p.table, p.cols = h.Table, h.Columns
	p.counts[h.Table] = 0
	return h.Table, h.Columns, nil
}

func (p *partReader) NextRow() ([]any, error) {
	for {
		l, err := p.line()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		h, row, err := p.parse(l)
		if err != nil {
			return nil, err
		}
		if row != nil {
			p.counts[p.table]++
			return row, nil
		}
		if h.Table == p.table && slices.Equal(h.Columns, p.cols) {
			continue // the table goes on in this part
		}
		p.peeked = h
		return nil, nil
	}
}

// checkCounts holds the rows read to the manifest's counts: a part cut
// short or left out is found even when its lines parse.
func (p *partReader) checkCounts() error {
	for _, t := range p.m.Tables {
		if got := p.counts[t.Name]; got != t.Rows {
			return fmt.Errorf("%w: table %s: %d rows read, the manifest lists %d", ErrDamaged, t.Name, got, t.Rows)
		}
	}
	return io.EOF
}
