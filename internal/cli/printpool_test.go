package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/api/wire"
)

// A todo held by an agent that has left the pool (its grant revoked) shows
// that agent's id under HELD BY instead of a blank.
func TestPrintPoolHolderThatLeft(t *testing.T) {
	v := poolView{Pool: wire.Pool{ID: "p1", Name: "reviewers", Queues: []string{"reviews"},
		Members: []wire.PoolMember{{AgentID: "a-1", Handle: "rev-a"}}},
		Todos: []wire.Todo{
			{ID: "t-held", State: "claimed", Queue: "reviews", AgentID: "a-gone", Title: "held by a leaver"},
			{ID: "t-rung", State: "pending", Queue: "reviews", RingAgentID: "a-1", Title: "rung"},
		}}
	var b bytes.Buffer
	if err := printPool(&b, v); err != nil {
		t.Fatal(err)
	}
	var held, rung string
	for _, l := range strings.Split(b.String(), "\n") {
		switch {
		case strings.HasPrefix(l, "t-held"):
			held = l
		case strings.HasPrefix(l, "t-rung"):
			rung = l
		}
	}
	if f := strings.Fields(held); len(f) < 4 || f[3] != "a-gone" {
		t.Errorf("held row %q: want HELD BY a-gone\n%s", held, b.String())
	}
	if f := strings.Fields(rung); len(f) < 5 || f[3] != "-" || f[4] != "rev-a" {
		t.Errorf("rung row %q: want HELD BY - and RINGS rev-a\n%s", rung, b.String())
	}
}
