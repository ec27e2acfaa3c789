package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
)

// Pool pages (design: Pools, Pool routing): the person's pools with their
// backlog, and one pool's members (as agent cards, with when the pool last
// rang each) and live todos with who holds or is rung for each.

// poolBack is the card's back value that returns its forms to a pool page.
const poolBack = "pool:"

// poolCounts is a pool's live todos by what they wait for.
type poolCounts struct {
	Pending  int // unclaimed and pending (rung at a member or held)
	Rung     int // of Pending, rung at a member now
	Claimed  int // in a member's hands
	Retrying int // failed, waiting for a retry
}

// Backlog is the work not in anyone's hands.
func (c poolCounts) Backlog() int { return c.Pending + c.Retrying }

func countPoolTodos(ts []domain.Todo) poolCounts {
	var c poolCounts
	for _, t := range ts {
		switch t.State {
		case domain.TodoPending:
			c.Pending++
			if t.RingAgentID != "" {
				c.Rung++
			}
		case domain.TodoClaimed:
			c.Claimed++
		case domain.TodoFailed:
			c.Retrying++
		}
	}
	return c
}

// poolRow is one line of the pools page.
type poolRow struct {
	Name    string
	Queues  []string
	Members int
	Counts  poolCounts
}

func (h *Handler) poolsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	ps, err := h.svc.ListPools(ctx, v.person)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	rows := make([]poolRow, 0, len(ps))
	for _, p := range ps {
		ts, err := h.svc.ListPoolTodos(ctx, v.person, p.Name)
		if err != nil {
			h.fail(w, r, v, err)
			return
		}
		rows = append(rows, poolRow{Name: p.Name, Queues: p.Queues, Members: len(p.Members), Counts: countPoolTodos(ts)})
	}
	h.render(w, r, http.StatusOK, "pools", v, "Pools", rows)
}

// poolView is the pool page.
type poolView struct {
	Since string // the event cursor taken before the reads (Console live updates)
	Pool  domain.Pool
	Cards []cardView
	// Lent are the members of other persons, in the pool through their
	// owners' pool grants (design: Pool grants): shown by handle and when
	// last rung, without a card (Owner only).
	Lent   []domain.PoolMember
	Todos  []poolTodoView
	Counts poolCounts
}

// poolTodoView is one live todo of the pool with the handles of the member
// holding it (Holder) or rung for it (Rung); both "" = held, no member can
// answer now.
type poolTodoView struct {
	domain.Todo
	Holder, Rung string
	// HolderLent, RungLent: that member is another person's (no agent page to link).
	HolderLent, RungLent bool
}

func (h *Handler) poolPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	since := h.svc.EventsCursor() // before the reads: see Console live updates
	p, err := h.svc.GetPool(ctx, v.person, r.PathValue("name"))
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	view := poolView{Since: since, Pool: p}
	handles := make(map[string]string, len(p.Members))
	lent := map[string]bool{}
	for _, m := range p.Members {
		handles[m.AgentID] = m.Handle
		_, c, err := h.ownedCard(ctx, v, m.AgentID)
		if domain.CodeOf(err) == domain.CodeNotFound {
			lent[m.AgentID] = true
			view.Lent = append(view.Lent, m)
			continue
		}
		if err != nil {
			h.fail(w, r, v, err)
			return
		}
		c.Back, c.Pooled, c.LastRung = poolBack+p.Name, true, m.LastRungAt
		view.Cards = append(view.Cards, c)
	}
	ts, err := h.svc.ListPoolTodos(ctx, v.person, p.Name)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	view.Counts = countPoolTodos(ts)
	handle := func(id string) string {
		if hd, ok := handles[id]; ok || id == "" {
			return hd
		}
		return id // not a member (any more): its id
	}
	for _, t := range ts {
		view.Todos = append(view.Todos, poolTodoView{Todo: t, Holder: handle(t.AgentID), Rung: handle(t.RingAgentID),
			HolderLent: lent[t.AgentID], RungLent: lent[t.RingAgentID]})
	}
	h.render(w, r, http.StatusOK, "pool", v, "Pool "+p.Name, view)
}

// poolBackURL is the pool page a card form posted from a pool page returns
// to (back=pool:<name>), or "" for another back value.
func poolBackURL(back string) string {
	name, ok := strings.CutPrefix(back, poolBack)
	if !ok || name == "" {
		return ""
	}
	return Prefix + "pools/" + url.PathEscape(name)
}
