package api

import "time"

// NotificationTest is a test message a notification target accepted.
type NotificationTest struct {
	Target string `json:"target"`
	// Kind is the target's kind: smtp or webhook.
	Kind   string    `json:"kind"`
	SentAt time.Time `json:"sent_at"`
}
