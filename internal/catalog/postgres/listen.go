package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// channel is the NOTIFY channel of job changes. Channels are per
// database, not per schema, so every payload starts with the writer's
// schema and a listener keeps only its own: catalogs in separate schemas
// of one database do not hear each other.
const channel = "coffer_jobs"

// listenerName is the application_name of listening sessions.
const listenerName = "coffer catalog listener"

// notify queues a notice, delivered to listeners when tx commits (and
// dropped if it rolls back); identical notices of one transaction are
// delivered once.
func notify(ctx context.Context, tx sqlcat.Tx, payload string) error {
	_, err := tx.Exec(ctx, `SELECT `+notifyExpr("$1"), payload)
	return err
}

// notifyExpr is notify's call in a statement, payload its text's
// expression.
func notifyExpr(payload string) string {
	return `pg_notify('` + channel + `', current_schema() || ' ' || ` + payload + `::text)`
}

// Listen delivers the payloads of this catalog's notices on a connection
// of its own (LISTEN holds a session), outside the pool. When the
// connection breaks it reconnects, with backoff, and delivers "" (notices
// may have been lost meanwhile). Delivery blocks while the reader is
// busy: PostgreSQL queues notices for a listening session, so nothing is
// dropped.
func (b *backend) Listen(ctx context.Context) (<-chan string, error) {
	conn, schema, err := b.listenConn(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan string, 256)
	go func() {
		defer close(out)
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		send := func(p string) bool {
			select {
			case out <- p:
				return true
			case <-ctx.Done():
				return false
			}
		}
		wait := 100 * time.Millisecond
		for {
			if conn == nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				if conn, schema, err = b.listenConn(ctx); err != nil {
					wait = min(2*wait, 5*time.Second)
					continue
				}
				wait = 100 * time.Millisecond
				if !send("") {
					return
				}
			}
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				_ = conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				continue
			}
			if p, ok := strings.CutPrefix(n.Payload, schema+" "); ok && !send(p) {
				return
			}
		}
	}()
	return out, nil
}

// listenConn opens a connection with the pool's settings, listens on the
// channel and reads the schema it writes to.
func (b *backend) listenConn(ctx context.Context) (*pgx.Conn, string, error) {
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenerName // shows in pg_stat_activity
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("listen for job changes: %w", err)
	}
	var schema string
	if _, err = conn.Exec(ctx, "LISTEN "+channel); err == nil {
		err = conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, "", fmt.Errorf("listen for job changes: %w", err)
	}
	return conn, schema, nil
}
