package storeutil

import (
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/groupcommit"
	"github.com/rollcall/rollcall/internal/store"
)

// CreatedTodo is what an audited CreateTodo returns: the todo, and
// whether this call created it (false: a live todo held the key).
type CreatedTodo struct {
	Todo    domain.Todo
	Created bool
}

// TodoCommitter group-commits audited CreateTodo calls (design: Group
// commit).
type TodoCommitter = groupcommit.Committer[store.CreateTodoParams, CreatedTodo]

// TodoItem is one CreateTodo in a TodoCommitter's batch.
type TodoItem = groupcommit.Item[store.CreateTodoParams, CreatedTodo]
