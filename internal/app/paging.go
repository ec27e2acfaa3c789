package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// MaxPageBytes bounds the JSON of the items of one page of a list route
// (design: Paging): a page ends before the item that would cross it (a page
// always holds at least one item). With 64 KiB payloads that is about 60
// todos, whatever the limit.
const MaxPageBytes = 4 << 20

// pageChunk is how many rows one store query of a page reads at most, so a
// request holds at most a chunk of rows besides the page itself.
const pageChunk = 64

// Page is one page of a list: the items and, when more follow, the opaque
// cursor of the next page (the `cursor` query parameter).
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Cursors are base64url of "<kind>:<key>": opaque to clients, and a cursor
// of one list is refused by another.
func encodeCursor(kind, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + key))
}

func decodeCursor(kind, c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	key, ok := strings.CutPrefix(string(b), kind+":")
	if err != nil || !ok || key == "" || len(c) > 200 {
		return "", domain.Errorf(domain.CodeInvalidArgument, "cursor %q is not a cursor of this list; pass the next_cursor of the previous page", trimForError(c)).At("/cursor")
	}
	return key, nil
}

func trimForError(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// fillPage reads up to limit items in chunks through fetch(after, n) (the
// n items after the key after, in list order), stopping before MaxPageBytes.
func fillPage[T any](kind string, limit int, after string, key func(T) string, fetch func(after string, n int) ([]T, error)) (Page[T], error) {
	p := Page[T]{Items: []T{}}
	size := 0
	for {
		n := min(limit-len(p.Items), pageChunk)
		rows, err := fetch(after, n+1)
		if err != nil {
			return Page[T]{}, err
		}
		for i, it := range rows {
			if i == n {
				if len(p.Items) == limit {
					p.NextCursor = encodeCursor(kind, after)
					return p, nil
				}
				break // more to read for this page: next chunk
			}
			b, err := json.Marshal(it)
			if err != nil {
				return Page[T]{}, err
			}
			if len(p.Items) > 0 && size+len(b)+1 > MaxPageBytes {
				p.NextCursor = encodeCursor(kind, after)
				return p, nil
			}
			size += len(b) + 1
			p.Items = append(p.Items, it)
			after = key(it)
		}
		if len(rows) <= n {
			return p, nil // the list ends here
		}
	}
}

// ListAgentTodosPage is ListAgentTodos paged: at most f.Limit todos (default
// 50, at most 500) and at most MaxPageBytes of JSON, after the todo named by
// cursor ("" = from the start). Errors: as ListAgentTodos, invalid_argument
// (pointer /cursor) for a cursor that is not one of this list.
func (s *Service) ListAgentTodosPage(ctx context.Context, by domain.Person, ref string, f TodoFilter, cursor string) (Page[domain.Todo], error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return Page[domain.Todo]{}, err
	}
	if err := checkTodoFilter(&f); err != nil {
		return Page[domain.Todo]{}, err
	}
	after, err := decodeCursor("todo", cursor)
	if err != nil {
		return Page[domain.Todo]{}, err
	}
	p := store.ListTodosParams{AgentID: a.ID, State: f.State}
	if f.Queue != "" {
		p.Queues = []string{f.Queue}
	}
	return fillPage("todo", f.Limit, after, func(t domain.Todo) string { return t.ID }, func(after string, n int) ([]domain.Todo, error) {
		q := p
		q.AfterID, q.Limit = after, n
		return s.store.ListTodos(ctx, q)
	})
}

// ListAuditPage is ListAudit paged by an opaque cursor (the sequence number
// of the last entry of the previous page; f.AfterSeq still works) and
// bounded by MaxPageBytes.
func (s *Service) ListAuditPage(ctx context.Context, by domain.Person, f AuditFilter, cursor string) (Page[domain.AuditEntry], error) {
	after, err := decodeCursor("audit", cursor)
	if err != nil {
		return Page[domain.AuditEntry]{}, err
	}
	if after != "" {
		n, perr := strconv.ParseInt(after, 10, 64)
		if perr != nil || n < 0 {
			return Page[domain.AuditEntry]{}, domain.Errorf(domain.CodeInvalidArgument, "cursor %q is not a cursor of this list", trimForError(cursor)).At("/cursor")
		}
		f.AfterSeq = max(f.AfterSeq, n)
	}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > 1000 {
		return Page[domain.AuditEntry]{}, domain.Errorf(domain.CodeInvalidArgument, "limit must be between 1 and 1000").At("/limit")
	}
	// ListAudit (each chunk) checks the caller's right to read.
	return fillPage("audit", limit, strconv.FormatInt(f.AfterSeq, 10), func(e domain.AuditEntry) string { return strconv.FormatInt(e.Seq, 10) },
		func(after string, n int) ([]domain.AuditEntry, error) {
			seq, _ := strconv.ParseInt(after, 10, 64)
			return s.ListAudit(ctx, by, AuditFilter{AgentRef: f.AgentRef, AfterSeq: seq, Limit: n})
		})
}

// ListAgentsPage is ListAgents paged (ordered by handle): at most limit
// agents (default 100, at most 500) after the handle named by cursor.
func (s *Service) ListAgentsPage(ctx context.Context, by domain.Person, owner string, ofOwner bool, limit int, cursor string) (Page[domain.Agent], error) {
	if limit < 0 || limit > domain.MaxListLimit {
		return Page[domain.Agent]{}, domain.Errorf(domain.CodeInvalidArgument, "limit must be between 1 and %d", domain.MaxListLimit).At("/limit")
	}
	if limit == 0 {
		limit = 100
	}
	after, err := decodeCursor("agent", cursor)
	if err != nil {
		return Page[domain.Agent]{}, err
	}
	var all []domain.Agent
	if ofOwner { // an admin finding another person's agents
		all, err = s.ListAgentsOf(ctx, by, owner)
	} else {
		all, err = s.ListAgents(ctx, by)
	}
	if err != nil {
		return Page[domain.Agent]{}, err
	}
	return fillPage("agent", limit, after, func(a domain.Agent) string { return a.Handle }, func(after string, n int) ([]domain.Agent, error) {
		i := 0
		if after != "" {
			for i < len(all) && all[i].Handle <= after {
				i++
			}
		}
		return all[i:min(i+n, len(all))], nil
	})
}

// PageOf pages a short list the use cases hold in memory (persons, tokens,
// hooks) the way the store-backed lists are paged: ordered by key (their
// ids are UUIDv7, so creation order), at most limit items (0 = 100, at most
// domain.MaxListLimit) and at most MaxPageBytes of JSON, after the key the
// cursor names. Errors: invalid_argument with pointer /limit or /cursor.
func PageOf[T any](kind string, all []T, key func(T) string, limit int, cursor string) (Page[T], error) {
	if limit < 0 || limit > domain.MaxListLimit {
		return Page[T]{}, domain.Errorf(domain.CodeInvalidArgument, "limit must be between 1 and %d", domain.MaxListLimit).At("/limit")
	}
	if limit == 0 {
		limit = 100
	}
	after, err := decodeCursor(kind, cursor)
	if err != nil {
		return Page[T]{}, err
	}
	sorted := slices.SortedFunc(slices.Values(all), func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return fillPage(kind, limit, after, key, func(after string, n int) ([]T, error) {
		i, _ := slices.BinarySearchFunc(sorted, after, func(t T, k string) int { return strings.Compare(key(t), k) })
		for i < len(sorted) && key(sorted[i]) <= after {
			i++
		}
		return sorted[i:min(i+n, len(sorted))], nil
	})
}
