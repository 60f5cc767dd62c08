package vtl

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
)

// Positioning, and the drive's modelled time: every move that is not the
// next record costs a repositioning, which is what makes multiplexed
// restores slower on tape.

// SpaceRecords moves over n records.
func (d *Drive) SpaceRecords(n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(); err != nil {
		return err
	}
	from := d.pos
	defer d.moved(from)
	for ; n > 0; n-- {
		if d.pos >= int64(len(d.cart.entries)) {
			return media.ErrEOD
		}
		d.pos++
		if d.cart.entries[d.pos-1].kind == kindFilemark {
			return media.ErrFilemark
		}
	}
	for ; n < 0; n++ {
		if d.pos == 0 {
			return media.ErrBOT
		}
		d.pos--
		if d.cart.entries[d.pos].kind == kindFilemark {
			return media.ErrFilemark
		}
	}
	return nil
}

// SpaceFilemarks moves over n filemarks.
func (d *Drive) SpaceFilemarks(n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(); err != nil {
		return err
	}
	from := d.pos
	defer d.moved(from)
	for ; n > 0; d.pos++ {
		if d.pos >= int64(len(d.cart.entries)) {
			return media.ErrEOD
		}
		if d.cart.entries[d.pos].kind == kindFilemark {
			n--
		}
	}
	for n < 0 {
		if d.pos == 0 {
			return media.ErrBOT
		}
		d.pos--
		if d.cart.entries[d.pos].kind == kindFilemark {
			n++
		}
	}
	return nil
}

// SeekEOD moves to the end of data.
func (d *Drive) SeekEOD() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(); err != nil {
		return err
	}
	from := d.pos
	d.pos = int64(len(d.cart.entries))
	d.moved(from)
	return nil
}

// Rewind moves to the beginning of the tape.
func (d *Drive) Rewind() error { return d.Locate(0) }

// Locate moves to a logical object number.
func (d *Drive) Locate(pos int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(); err != nil {
		return err
	}
	if pos < 0 || pos > int64(len(d.cart.entries)) {
		return fmt.Errorf("%w: position %d is beyond the end of data (%d)", media.ErrEOD, pos, len(d.cart.entries))
	}
	from := d.pos
	d.pos = pos
	d.moved(from)
	return nil
}

// Tell returns the logical object number.
func (d *Drive) Tell() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(); err != nil {
		return 0, err
	}
	return d.pos, nil
}

// transfer accounts for n bytes streamed at the drive's rate.
func (d *Drive) transfer(n int64) {
	if r := d.lib.st.Config.Rate; r > 0 {
		d.busy(time.Duration(float64(n) / float64(r) * float64(time.Second)))
	}
}

// moved accounts for a reposition from position from to d.pos: a fixed
// cost plus the distance at the locate rate.
func (d *Drive) moved(from int64) {
	if from == d.pos {
		return
	}
	d.stats.Repositions++
	cfg := d.lib.st.Config
	cost := cfg.RepositionTime
	dist := d.cart.endOffset(d.pos) - d.cart.endOffset(from)
	if dist < 0 {
		dist = -dist
	}
	if rate := cfg.LocateRate; rate > 0 {
		cost += time.Duration(float64(dist) / float64(rate) * float64(time.Second))
	} else if cfg.Rate > 0 {
		cost += time.Duration(float64(dist) / float64(10*cfg.Rate) * float64(time.Second))
	}
	d.busy(cost)
}

// busy adds modelled drive time, and with Throttle waits until the real
// clock has caught up with it: the drive is never faster than configured.
func (d *Drive) busy(t time.Duration) {
	if t <= 0 {
		return
	}
	if d.started.IsZero() {
		d.started = time.Now()
	}
	d.stats.Busy += t
	if d.lib.st.Config.Throttle {
		if ahead := time.Until(d.started.Add(d.stats.Busy)); ahead > 0 {
			time.Sleep(ahead)
		}
	}
}
