package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
)

// Pool hands out the volumes of a media pool in a library: appendable
// ones of the pool first, then blank cartridges, labelled into it.
type Pool struct {
	Lib       *Library
	Name      string
	BlockSize int
	// Allowed, if set, restricts the cartridges the pool may use.
	Allowed func(barcode string) bool
	// Catalogue, if set, is what the media catalogue knows of the
	// library's volumes, by barcode: Next then tries the pool's volumes
	// that are not full first, and the other pools' and full ones only
	// when nothing else is writable (the catalogue may be stale).
	Catalogue map[string]Catalogued
	// Claims, if set, is shared by the pools of one copy's drives
	// (NewClaims); nil: the pool's own.
	Claims *Claims
}

// Claims keeps the pools of a copy's drives apart: a cartridge one drive
// took is no other's, and the drives choose one at a time, as the one
// arm of a changer serves them.
type Claims struct {
	mu    sync.Mutex
	taken map[string]bool
}

// NewClaims returns claims for the drives of one copy.
func NewClaims() *Claims { return &Claims{taken: map[string]bool{}} }

// Catalogued is what the media catalogue knows of a volume. Finding a
// pool's volume otherwise means loading and reading the label of each
// cartridge in turn, a minute or more each on a real drive.
type Catalogued struct {
	Pool string
	Full bool
}

// candidates splits the cartridges Next tries: first the pool's
// appendable volumes the catalogue knows, then those it does not know
// (blank or foreign); later, only when none of those is writable, the
// volumes it says are full or another pool's.
func (p *Pool) candidates(codes []string) (first, later []string) {
	if p.Catalogue == nil {
		return codes, nil
	}
	var mine, unknown []string
	for _, bc := range codes {
		c, known := p.Catalogue[bc]
		switch {
		case !known:
			unknown = append(unknown, bc)
		case c.Pool == p.Name && !c.Full:
			mine = append(mine, bc)
		default:
			later = append(later, bc)
		}
	}
	return append(mine, unknown...), later
}

// First returns the first volume to write on.
func (p *Pool) First(ctx context.Context) (*Volume, error) { return p.Next(ctx, nil) }

// Next implements Volumes.
// The volume returned, and a full one handed back, are claimed: no
// drive of the copy gets them again.
func (p *Pool) Next(ctx context.Context, full *Volume) (*Volume, error) {
	if p.Claims == nil {
		p.Claims = NewClaims()
	}
	c := p.Claims
	c.mu.Lock()
	defer c.mu.Unlock()
	if full != nil {
		c.taken[full.Label.Barcode] = true
	}
	codes, err := p.Lib.Barcodes()
	if err != nil {
		return nil, err
	}
	first, later := p.candidates(codes)
	var passed []string
	for _, codes := range [][]string{first, later} {
		v, why, err := p.writable(ctx, codes, full)
		if v != nil {
			c.taken[v.Label.Barcode] = true
		}
		if v != nil || err != nil {
			return v, err
		}
		passed = append(passed, why...)
	}
	if len(passed) == 0 {
		return nil, fmt.Errorf("media pool %s has no writable volume left in the library (add blank cartridges)", p.Name)
	}
	// Saying why each cartridge was passed over keeps an unreadable
	// volume of the pool from hiding behind advice to add blank ones.
	return nil, fmt.Errorf("media pool %s has no writable volume left in the library (add blank cartridges); passed over: %s",
		p.Name, strings.Join(passed, "; "))
}

// writable returns the first of codes that is the pool's appendable
// volume, else the first blank one labelled into the pool; nil, with why
// each cartridge was passed over, when none is.
func (p *Pool) writable(ctx context.Context, codes []string, full *Volume) (*Volume, []string, error) {
	var blank, passed []string
	for _, bc := range codes {
		if p.Claims.taken[bc] || (p.Allowed != nil && !p.Allowed(bc)) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		v, err := p.Lib.Mount(ctx, bc)
		switch {
		case errors.Is(err, ErrBlank), errors.Is(err, ErrUnfinishedLabel):
			blank = append(blank, bc)
			continue
		case errors.Is(err, media.ErrNoDrive):
			return nil, nil, err // no other cartridge mounts either
		case err != nil:
			passed = append(passed, fmt.Sprintf("%s does not mount: %v", bc, err))
			continue
		}
		if why := p.unfit(v); why != "" {
			passed = append(passed, bc+" "+why)
			continue
		}
		return v, nil, nil
	}
	for _, bc := range blank {
		if err := p.Lib.Load(bc); err != nil {
			return nil, nil, err
		}
		var set string
		if full != nil {
			set = full.Label.MediaSet
		}
		v, err := Label(p.Lib.Drive, LabelOptions{Barcode: bc, Pool: p.Name, MediaSet: set, BlockSize: p.BlockSize, Now: time.Now()})
		switch {
		case errors.Is(err, ErrProtected):
			passed = append(passed, fmt.Sprintf("%s does not take a label: %v", bc, err))
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("label %s: %w", bc, err)
		}
		return v, nil, nil
	}
	return nil, passed, nil
}

// unfit says why a mounted volume cannot take this pool's writes, or "".
func (p *Pool) unfit(v *Volume) string {
	switch {
	case v.Label.Pool != p.Name:
		return "belongs to pool " + v.Label.Pool
	case v.Index.Full:
		return "is full"
	case p.BlockSize != 0 && v.Label.BlockSize != p.BlockSize:
		return fmt.Sprintf("has blocks of %d bytes, not %d", v.Label.BlockSize, p.BlockSize)
	}
	st, err := v.Drive.Status()
	switch {
	case err != nil:
		return fmt.Sprintf("has a drive that does not answer: %v", err)
	case st.WriteProtected:
		return "is write-protected"
	}
	return ""
}
