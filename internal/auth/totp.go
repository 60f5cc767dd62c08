package auth

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"image/png"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// TOTP (RFC 6238) as every authenticator app reads it by default: SHA-1,
// six digits, a 30-second step. A code is accepted in its step and the
// steps on either side (a phone's clock a little off), and never twice:
// the last step accepted is stored, and only later steps count.

var totpOptions = totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// totpSeedBytes is the seed's size: RFC 4226's recommended 160 bits.
const totpSeedBytes = 20

// TOTPEnrolment is a seed waiting for its first code: the secret (base32)
// and the otpauth:// URI an app reads from a QR code. Shown this once.
type TOTPEnrolment struct {
	Secret string
	URI    string
	// QRCodePNG is URI as a QR code, a PNG image.
	QRCodePNG []byte
}

// qrSize is the QR code's width and height in pixels: read at arm's
// length by a phone's camera.
const qrSize = 240

// EnrolTOTP makes a new TOTP seed for user, waiting for ConfirmTOTP (an
// earlier unconfirmed one is replaced). A user with a confirmed TOTP
// removes it first.
func (s *Service) EnrolTOTP(ctx context.Context, actor *Subject, user, remote string) (TOTPEnrolment, error) {
	const op = "enrol-totp"
	object := userObject(user)
	if err := mayEnrol(actor, user); err != nil {
		return TOTPEnrolment{}, s.auditFailure(ctx, actor, op, object, remote, err)
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: s.o.Issuer, AccountName: user, Period: uint(totpOptions.Period),
		SecretSize: totpSeedBytes, Digits: totpOptions.Digits, Algorithm: totpOptions.Algorithm})
	if err != nil {
		return TOTPEnrolment{}, err
	}
	sealed, err := s.seal(user, []byte(key.Secret()))
	if err != nil {
		return TOTPEnrolment{}, err
	}
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		if _, err := tx.GetUser(ctx, user); err != nil {
			return err
		}
		cur, err := tx.GetTOTP(ctx, user)
		if err == nil && !cur.ConfirmedAt.IsZero() {
			return errorf(ErrConflict, "%s has a TOTP already: remove it first (coffer account totp remove)", user)
		}
		if err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return err
		}
		if err := tx.PutTOTP(ctx, catalog.TOTPSecret{User: user, Sealed: sealed, CreatedAt: s.now()}); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return TOTPEnrolment{}, s.changeError(ctx, actor, op, object, remote, "user "+user, err)
	}
	img, err := key.Image(qrSize, qrSize)
	if err != nil {
		return TOTPEnrolment{}, err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return TOTPEnrolment{}, err
	}
	return TOTPEnrolment{Secret: key.Secret(), URI: key.URL(), QRCodePNG: buf.Bytes()}, nil
}

// ConfirmTOTP completes an enrolment with a code from the app, which
// proves the app holds the seed. It returns the user's recovery codes,
// made now (shown this once). A session sent to enrol becomes a full
// one. Wrong codes are throttled as the second step's are.
func (s *Service) ConfirmTOTP(ctx context.Context, actor *Subject, user, code, remote string) ([]string, error) {
	const op = "confirm-totp"
	object := userObject(user)
	if err := mayEnrol(actor, user); err != nil {
		return nil, s.auditFailure(ctx, actor, op, object, remote, err)
	}
	now := s.now()
	before, after, err := s.countAttemptOn(ctx, op, user, s.factorThrottleKeys(user, remote), remote, now)
	if err != nil {
		return nil, err
	}
	codes, hashed := newRecoveryCodes(user, now)
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		cur, err := tx.GetTOTP(ctx, user)
		if errors.Is(err, catalog.ErrNotFound) || (err == nil && !cur.ConfirmedAt.IsZero()) {
			return errorf(ErrConflict, "%s has no TOTP enrolment waiting for its first code: enrol first", user)
		}
		if err != nil {
			return err
		}
		if err := s.useTOTPCode(ctx, tx, user, normalizeCode(code), now); err != nil {
			return err
		}
		if err := settleAttempt(ctx, tx, before, after); err != nil {
			return err
		}
		if err := confirmTOTP(ctx, tx, user, now); err != nil {
			return err
		}
		if err := tx.ReplaceRecoveryCodes(ctx, user, hashed); err != nil {
			return err
		}
		if err := factorsChanged(ctx, tx, actor); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr, rec.Detail = remote, "TOTP enrolled; new recovery codes"
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return nil, s.changeError(ctx, actor, op, object, remote, "user "+user, err)
	}
	return codes, nil
}

// confirmTOTP marks the seed useTOTPCode has just accepted a code of as
// confirmed.
func confirmTOTP(ctx context.Context, tx catalog.AccessTx, user string, now time.Time) error {
	t, err := tx.GetTOTP(ctx, user)
	if err != nil {
		return err
	}
	t.ConfirmedAt = now
	return tx.PutTOTP(ctx, t)
}

// RemoveTOTP removes user's TOTP (and the recovery codes, when no other
// factor is left).
func (s *Service) RemoveTOTP(ctx context.Context, actor *Subject, user, remote string) error {
	const op = "remove-totp"
	object := userObject(user)
	if err := mayRemove(actor, user); err != nil {
		return s.auditFailure(ctx, actor, op, object, remote, err)
	}
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		deleted, err := tx.DeleteTOTP(ctx, user)
		if err != nil {
			return err
		}
		if !deleted {
			return errorf(ErrNotFound, "%s has no TOTP", user)
		}
		if err := dropCodesWithoutFactor(ctx, tx, user); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	return s.changeError(ctx, actor, op, object, remote, "user "+user, err)
}

// useTOTPCode accepts code for user's seed in tx: it must be the code of
// a step around now later than the last one accepted, which it then
// becomes. Anything else is errBadCode.
func (s *Service) useTOTPCode(ctx context.Context, tx catalog.AccessTx, user, code string, now time.Time) error {
	t, err := tx.GetTOTP(ctx, user)
	if errors.Is(err, catalog.ErrNotFound) {
		return errBadCode
	}
	if err != nil {
		return err
	}
	seed, err := s.open(user, t.Sealed)
	if err != nil {
		return err
	}
	step, ok := matchTOTP(string(seed), code, t.LastStep, now)
	if !ok {
		return errBadCode
	}
	t.LastStep = step
	return tx.PutTOTP(ctx, t)
}

// matchTOTP finds the step around now whose code is code, later than
// last.
func matchTOTP(seed, code string, last int64, now time.Time) (int64, bool) {
	if !isTOTPCode(code) {
		return 0, false
	}
	period := int64(totpOptions.Period)
	cur := now.Unix() / period
	for step := cur - 1; step <= cur+1; step++ {
		if step <= last {
			continue
		}
		want, err := totp.GenerateCodeCustom(seed, time.Unix(step*period, 0), totpOptions)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return step, true
		}
	}
	return 0, false
}

// isTOTPCode reports six digits.
func isTOTPCode(code string) bool {
	if len(code) != totpOptions.Digits.Length() {
		return false
	}
	for _, c := range code {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
