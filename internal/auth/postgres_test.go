package auth

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestOnPostgres runs the tests of the service again over PostgreSQL (the
// catalog of several servers): one server, a schema per test.
func TestOnPostgres(t *testing.T) {
	server := testutil.StartPostgres(t)
	var seq atomic.Int64
	sqliteDB := freshDB
	freshDB = func(t *testing.T) func(context.Context) (catalog.Catalog, error) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, server)
		must(t, err)
		defer conn.Close(ctx)
		schema := fmt.Sprintf("t%d", seq.Add(1))
		_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
		must(t, err)
		dsn := server + "&search_path=" + schema
		return func(ctx context.Context) (catalog.Catalog, error) { return postgres.Open(ctx, dsn, postgres.Options{}) }
	}
	defer func() { freshDB = sqliteDB }()
	for name, test := range map[string]func(*testing.T){
		"Login":                  TestLogin,
		"FailedLoginsLookAlike":  TestFailedLoginsLookAlike,
		"UserLockoutAndBackoff":  TestUserLockoutAndBackoff,
		"AddressLockout":         TestAddressLockout,
		"LockoutSurvivesRestart": TestLockoutSurvivesRestart,
		"ParallelGuesses":        TestParallelGuessesAreCountedUpFront,
		"LoginRehashesOldHashes": TestLoginRehashesOldHashes,
		"SessionIdleTimeout":     TestSessionIdleTimeout,
		"SessionAbsoluteTimeout": TestSessionAbsoluteTimeout,
		"LogoutAndSessionEnds":   TestLogoutAndSessionEnds,
		"SessionSeesACLChanges":  TestSessionSeesACLChanges,
		"APITokenLifecycle":      TestAPITokenLifecycle,
		"TokenSubset":            TestTokenSubset,
		"OthersTokens":           TestOthersTokens,
		"Bootstrap":              TestBootstrap,
		"SetupLinkExpires":       TestSetupLinkExpiresAndIsReissued,
		"ConcurrentBootstrap":    TestConcurrentBootstrap,
		"UserSetupLinks":         TestUserSetupLinks,
		"CreateUser":             TestCreateUser,
		"ManagingUsers":          TestManagingUsersNeedsPermModify,
		"DelegatedPermModify":    TestDelegatedPermModify,
		"LastAdminIsKept":        TestLastAdminIsKept,
		"ChangeOwnPassword":      TestChangeOwnPassword,
		"AuditOfAccessChanges":   TestAuditOfAccessChanges,
		"RecordAndQueryAudit":    TestRecordAndQueryAudit,
		"TOTPAndSecondStep":      TestTOTPEnrolmentAndSecondStep,
		"RecoveryCodeUsedOnce":   TestRecoveryCodeIsUsedOnce,
		"SecondFactorThrottled":  TestSecondFactorIsThrottled,
		"SecondFactorRules":      TestSecondFactorRules,
	} {
		t.Run(name, test)
	}
}
