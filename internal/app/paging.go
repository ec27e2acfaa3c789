package app

import (
	"context"
	"strconv"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/paging"
	"github.com/rollcall/rollcall/internal/store"
)

// MaxPageBytes bounds the JSON of the items of one page of a list route
// (paging.MaxBytes; design: Paging).
const MaxPageBytes = paging.MaxBytes

// Page is one page of a list: the items and, when more follow, the opaque
// cursor of the next page (the `cursor` query parameter).
type Page[T any] = paging.Page[T]

// ListAgentTodosPage is ListAgentTodos paged: at most f.Limit todos (default
// 50, at most 500) and at most MaxPageBytes of JSON, after the todo named by
// cursor ("" = from the start). Errors: as ListAgentTodos, invalid_argument
// (pointer /cursor) for a cursor that is not one of this list.
func (s *Service) ListAgentTodosPage(ctx context.Context, by domain.Person, ref string, f TodoFilter, cursor string) (Page[domain.Todo], error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return Page[domain.Todo]{}, err
	}
	if err := f.Check(); err != nil {
		return Page[domain.Todo]{}, err
	}
	after, err := paging.Decode("todo", cursor)
	if err != nil {
		return Page[domain.Todo]{}, err
	}
	p := store.ListTodosParams{AgentID: a.ID, State: f.State}
	if f.Queue != "" {
		p.Queues = []string{f.Queue}
	}
	return paging.Fill("todo", f.Limit, after, func(t domain.Todo) string { return t.ID }, func(after string, n int) ([]domain.Todo, error) {
		q := p
		q.AfterID, q.Limit = after, n
		return s.store.ListTodos(ctx, q)
	})
}

// ListAuditPage is ListAudit paged by an opaque cursor (the sequence number
// of the last entry of the previous page; f.AfterSeq still works) and
// bounded by MaxPageBytes.
func (s *Service) ListAuditPage(ctx context.Context, by domain.Person, f AuditFilter, cursor string) (Page[domain.AuditEntry], error) {
	after, err := paging.Decode("audit", cursor)
	if err != nil {
		return Page[domain.AuditEntry]{}, err
	}
	if after != "" {
		n, perr := strconv.ParseInt(after, 10, 64)
		if perr != nil || n < 0 {
			return Page[domain.AuditEntry]{}, domain.Errorf(domain.CodeInvalidArgument, "cursor %q is not a cursor of this list", paging.TrimForError(cursor)).At("/cursor")
		}
		f.AfterSeq = max(f.AfterSeq, n)
	}
	limit, err := paging.Limit(f.Limit, 100, maxAuditLimit)
	if err != nil {
		return Page[domain.AuditEntry]{}, err
	}
	// ListAudit (each chunk) checks the caller's right to read.
	return paging.Fill("audit", limit, strconv.FormatInt(f.AfterSeq, 10), func(e domain.AuditEntry) string { return strconv.FormatInt(e.Seq, 10) },
		func(after string, n int) ([]domain.AuditEntry, error) {
			seq, _ := strconv.ParseInt(after, 10, 64)
			return s.ListAudit(ctx, by, AuditFilter{AgentRef: f.AgentRef, AfterSeq: seq, Limit: n})
		})
}

// ListAgentsPage is ListAgents paged (ordered by handle): at most limit
// agents (default 100, at most 500) after the handle named by cursor.
func (s *Service) ListAgentsPage(ctx context.Context, by domain.Person, owner string, ofOwner bool, limit int, cursor string) (Page[domain.Agent], error) {
	// The page's limit and cursor are checked before the read.
	if _, err := paging.Limit(limit, 100, domain.MaxListLimit); err != nil {
		return Page[domain.Agent]{}, err
	}
	if _, err := paging.Decode("agent", cursor); err != nil {
		return Page[domain.Agent]{}, err
	}
	var all []domain.Agent
	var err error
	if ofOwner { // an admin finding another person's agents
		all, err = s.ListAgentsOf(ctx, by, owner)
	} else {
		all, err = s.ListAgents(ctx, by)
	}
	if err != nil {
		return Page[domain.Agent]{}, err
	}
	return paging.Of("agent", all, func(a domain.Agent) string { return a.Handle }, limit, cursor)
}

// PageOf pages a short list the use cases hold in memory (persons, tokens,
// hooks) the way the store-backed lists are paged (paging.Of): ordered by
// key (their ids are UUIDv7, so creation order), at most limit items (0 =
// 100, at most domain.MaxListLimit) and at most MaxPageBytes of JSON, after
// the key the cursor names. Errors: invalid_argument with pointer /limit or
// /cursor.
func PageOf[T any](kind string, all []T, key func(T) string, limit int, cursor string) (Page[T], error) {
	return paging.Of(kind, all, key, limit, cursor)
}
