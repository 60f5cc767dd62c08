package st

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
)

// Changer runs mtx against a changer's SCSI generic device (/dev/sgN).
type Changer struct {
	Device string
	// Timeout bounds one robot move (default 10 minutes).
	Timeout time.Duration
	// mu runs one mtx at a time: the drives of a copy share the robot,
	// which moves one cartridge at a time, and a status asked for during
	// a move is refused as busy by many changers.
	mu sync.Mutex
}

var _ media.Changer = (*Changer)(nil)

func (c *Changer) run(args ...string) (string, error) {
	t := c.Timeout
	if t == 0 {
		t = 10 * time.Minute
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "mtx", append([]string{"-f", c.Device}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("changer %s: mtx is not installed (the mtx package, which drives changers): %w", c.Device, err)
		}
		msg := strings.TrimSpace(errb.String())
		if strings.Contains(msg, "BUSY") || strings.Contains(strings.ToLower(msg), "not ready") {
			return "", fmt.Errorf("%w: mtx %s: %s", media.ErrBusy, strings.Join(args, " "), msg)
		}
		return "", fmt.Errorf("mtx -f %s %s: %v: %s", c.Device, strings.Join(args, " "), err, msg)
	}
	return out.String(), nil
}

// Lock takes the changer for one operation, as a virtual library's lock
// does: an flock on the changer's device node, which every coffer
// process driving this changer takes (mtx itself takes none), so that one
// operation's robot moves never unload a cartridge another is writing.
// It fails with media.ErrInUse while another holds it, and names the
// device when it is not there.
func (c *Changer) Lock() (unlock func() error, err error) {
	f, err := os.Open(c.Device)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("st: the changer's device %s does not exist: is the library attached "+
			"(`lsscsi -g` lists its changer as a mediumx, /dev/sgN)? (%w)", c.Device, err)
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // a lock file: nothing written
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("st: changer %s is %w", c.Device, media.ErrInUse)
		}
		return nil, fmt.Errorf("st: lock changer %s: %w", c.Device, err)
	}
	return f.Close, nil
}

// Status runs `mtx status` and parses it.
func (c *Changer) Status() (*media.ChangerStatus, error) {
	out, err := c.run("status")
	if err != nil {
		return nil, err
	}
	return media.ParseMtxStatus(out)
}

// Load runs `mtx load slot drive`.
func (c *Changer) Load(slot, drive int) error {
	_, err := c.run("load", strconv.Itoa(slot), strconv.Itoa(drive))
	return err
}

// Unload runs `mtx unload slot drive`; slot 0 returns the cartridge to
// the slot the changer says it came from.
func (c *Changer) Unload(slot, drive int) error {
	if slot == 0 {
		st, err := c.Status()
		if err != nil {
			return err
		}
		for _, d := range st.Drives {
			if d.Index == drive {
				slot = d.SourceSlot
			}
		}
		if slot == 0 {
			return fmt.Errorf("mtx: drive %d's source slot is unknown; name the slot", drive)
		}
	}
	_, err := c.run("unload", strconv.Itoa(slot), strconv.Itoa(drive))
	return err
}

// Transfer runs `mtx transfer from to`.
func (c *Changer) Transfer(from, to int) error {
	_, err := c.run("transfer", strconv.Itoa(from), strconv.Itoa(to))
	return err
}

// Inventory runs `mtx inventory`.
func (c *Changer) Inventory() error {
	_, err := c.run("inventory")
	return err
}
