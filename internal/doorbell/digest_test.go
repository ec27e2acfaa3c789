package doorbell

import (
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/store"
)

// TestDigestNamesOldestPendingTodo: meta.oldest_todo_id is the pending todo
// created first, whatever the order the store returned them in; on equal
// creation times the smaller id wins (design: Digest names the oldest todo).
func TestDigestNamesOldestPendingTodo(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		pend []store.PendingTodo
		want string
		age  string
	}{
		{"one", []store.PendingTodo{{ID: "t1", Queue: "q", CreatedAt: now.Add(-90 * time.Second)}}, "t1", "1m"},
		{"oldest last", []store.PendingTodo{
			{ID: "t1", Queue: "q", CreatedAt: now.Add(-time.Minute)},
			{ID: "t2", Queue: "r", CreatedAt: now.Add(-3 * time.Hour)},
			{ID: "t3", Queue: "q", CreatedAt: now.Add(-2 * time.Hour)},
		}, "t2", "3h00m"},
		{"tie takes the smaller id", []store.PendingTodo{
			{ID: "t9", Queue: "q", CreatedAt: now.Add(-time.Hour)},
			{ID: "t4", Queue: "q", CreatedAt: now.Add(-time.Hour)},
			{ID: "t5", Queue: "q", CreatedAt: now.Add(-time.Minute)},
		}, "t4", "1h00m"},
		{"created after now (clock skew) ages 0s", []store.PendingTodo{{ID: "t1", Queue: "q", CreatedAt: now.Add(time.Second)}}, "t1", "0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := BuildDigest(c.pend, ReasonReconnect, now)
			if m.Meta["oldest_todo_id"] != c.want {
				t.Fatalf("oldest_todo_id = %q, want %q (meta %v)", m.Meta["oldest_todo_id"], c.want, m.Meta)
			}
			if _, ok := m.Meta["todo_id"]; ok {
				t.Fatalf("a digest carries no todo_id: %v", m.Meta)
			}
			for _, part := range []string{"oldest waiting " + c.age + " is todo " + c.want, `claim {"todo_id":"` + c.want + `"}`, "claim_next {}"} {
				if !strings.Contains(m.Content, part) {
					t.Fatalf("content %q lacks %q", m.Content, part)
				}
			}
		})
	}
}
