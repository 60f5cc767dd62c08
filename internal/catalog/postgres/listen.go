package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// channel is the NOTIFY channel of job changes, and lineChannel that of
// a job's log lines and progress samples: most notices, which only a
// process with subscribers wants, so it alone listens there. Channels
// are per database, not per schema, so every payload starts with the
// writer's schema and a listener keeps only its own: catalogs in
// separate schemas of one database do not hear each other.
const (
	channel     = "coffer_jobs"
	lineChannel = "coffer_jobs_log"
)

// channelOf is the channel of lines' notices (lines) or of the others.
func channelOf(lines bool) string {
	if lines {
		return lineChannel
	}
	return channel
}

// listenerName and lineListenerName are the application_name of
// listening sessions.
const (
	listenerName     = "coffer catalog listener"
	lineListenerName = "coffer catalog line listener"
)

// notify queues a notice, delivered to listeners when tx commits (and
// dropped if it rolls back); identical notices of one transaction are
// delivered once.
func notify(ctx context.Context, tx sqlcat.Tx, payload string, lines bool) error {
	_, err := tx.Exec(ctx, `SELECT `+notifyExpr(channelOf(lines), "$1"), payload)
	return err
}

// notifyExpr is notify's call in a statement on channel ch, payload its
// text's expression.
func notifyExpr(ch, payload string) string {
	return `pg_notify('` + ch + `', current_schema() || ' ' || ` + payload + `::text)`
}

// Listen delivers the payloads of this catalog's notices (of lines, or
// the others) on a connection of its own (LISTEN holds a session),
// outside the pool. When the connection breaks it reconnects, with
// backoff, and delivers "" (notices may have been lost meanwhile).
// Delivery blocks while the reader is busy: PostgreSQL queues notices for
// a listening session, so nothing is dropped.
//
// The others' listener connects before Listen returns. The lines'
// connects in the background, retrying, and delivers "" once LISTEN
// holds: its reader, which starts listening when it gets subscribers,
// reads then what they follow, and misses no line appended before.
func (b *backend) Listen(ctx context.Context, lines bool) (<-chan string, error) {
	var conn *pgx.Conn
	var schema string
	if !lines {
		var err error
		if conn, schema, err = b.listenConn(ctx, false); err != nil {
			return nil, err
		}
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
		wait, first := 100*time.Millisecond, conn == nil
		for {
			if conn == nil {
				if !first {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				first = false
				var err error
				if conn, schema, err = b.listenConn(ctx, lines); err != nil {
					if ctx.Err() != nil {
						return
					}
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
// channel of lines or the other and reads the schema it writes to.
func (b *backend) listenConn(ctx context.Context, lines bool) (*pgx.Conn, string, error) {
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenerName // shows in pg_stat_activity
	if lines {
		cfg.RuntimeParams["application_name"] = lineListenerName
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("listen for job changes: %w", err)
	}
	var schema string
	if _, err = conn.Exec(ctx, "LISTEN "+channelOf(lines)); err == nil {
		err = conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, "", fmt.Errorf("listen for job changes: %w", err)
	}
	return conn, schema, nil
}
