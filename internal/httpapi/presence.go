package httpapi

import (
	"net/http"

	"github.com/rollcall/rollcall/internal/domain"
)

// Operator presence controls, (design: Operator overrides). Only the owner may use them
// (another person gets 404); a revoked agent answers 409.

// shiftInput is the body of PUT /v1/agents/{ref}/shift; null (or an absent
// member) clears the shift.
type shiftInput struct {
	Shift *string `json:"shift"`
}

func (a *api) setShift(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	var in shiftInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	p, err := a.svc.SetShift(r.Context(), by, r.PathValue("ref"), in.Shift)
	return answer(w, http.StatusOK, p, err)
}
