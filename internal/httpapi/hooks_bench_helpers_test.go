package httpapi_test

import (
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi/apitest"
)

type benchEnv struct {
	*apitest.Env
	person domain.Person
}

func apitestEnv(b *testing.B) benchEnv {
	e := apitest.New(b)
	p, err := e.Service.AuthenticatePerson(b.Context(), e.AdminToken)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Service.Vend(b.Context(), p, app.VendInput{Handle: "builder", Queues: []string{"review"}}); err != nil {
		b.Fatal(err)
	}
	return benchEnv{Env: e, person: p}
}
