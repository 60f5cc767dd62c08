package s3

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/coffer-backup/coffer/internal/store"
)

// errorCode returns the S3 error code ("NoSuchKey", "SlowDown", ...), or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// httpStatus returns the HTTP status of a failed request, or 0.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isPrecondition(err error) bool {
	return errorCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed
}

// isLockRefusal recognises a delete or overwrite refused because of Object
// Lock. AWS answers 403 AccessDenied with a message naming the lock; other
// servers use their own codes.
func isLockRefusal(err error) bool {
	switch errorCode(err) {
	case "ObjectLocked", "InvalidRequest", "AccessDenied":
		var ae smithy.APIError
		if errors.As(err, &ae) {
			m := strings.ToLower(ae.ErrorMessage())
			return strings.Contains(m, "lock") || strings.Contains(m, "retention") || strings.Contains(m, "worm")
		}
	}
	return false
}

// translate maps S3 errors to store sentinels, keeping the original text.
func translate(err error) error {
	if err == nil {
		return nil
	}
	code, status := errorCode(err), httpStatus(err)
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("%w: bucket does not exist: %w", store.ErrNotFound, err)
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	case isPrecondition(err):
		return fmt.Errorf("%w: %w", store.ErrPreconditionFailed, err)
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %w", store.ErrInvalidRange, err)
	case isLockRefusal(err):
		return fmt.Errorf("%w: %w", store.ErrRetained, err)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "InvalidToken" ||
		code == "XAdminUserNotFound":
		return fmt.Errorf("%w: S3 credentials rejected: %w", store.ErrPermission, err)
	case code == "AccessDenied" || status == http.StatusForbidden:
		return fmt.Errorf("%w: %w", store.ErrPermission, err)
	case code == "QuotaExceeded" || code == "XMinioStorageFull" || code == "StorageFull" || status == http.StatusInsufficientStorage:
		return fmt.Errorf("%w: %w", store.ErrNoSpace, err)
	}
	return err
}
