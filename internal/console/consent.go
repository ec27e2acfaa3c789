package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/oauth"
)

// ConsentPath is the consent page of a sign-in (design: Consent): an
// authorization request of an MCP client lands here with its id.
const ConsentPath = Prefix + "oauth/consent"

type consentView struct {
	ID     string
	Client struct{ Name string }
	Host   string // where the browser returns
	Agents []domain.Agent
	Vend   vendForm // the vend form, for an agent made for this client
}

// consentPage shows which client asks and the person's agents to pick from.
func (h *Handler) consentPage(w http.ResponseWriter, r *http.Request, v *visit) {
	h.renderConsent(w, r, v, http.StatusOK, r.URL.Query().Get("id"), vendForm{Verbs: allVerbs()})
}

func (h *Handler) renderConsent(w http.ResponseWriter, r *http.Request, v *visit, status int, id string, f vendForm) {
	c, err := h.signIns.OAuthConsentFor(r.Context(), v.person, id)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	view := consentView{ID: c.Request.ID, Agents: c.Agents, Vend: f}
	view.Client.Name = c.Client.Name
	if u, err := url.Parse(c.Request.RedirectURI); err == nil && !strings.ContainsAny(u.Host, " ;,'\"") {
		view.Host = u.Host
		// The decision's redirects end at the client's redirect URI, which
		// form-action governs too: this page allows that one origin.
		w.Header().Set("Content-Security-Policy", csp("'self' "+u.Scheme+"://"+u.Host))
	}
	h.render(w, r, status, "consent", v, "Sign in "+c.Client.Name, view)
}

// consent records the decision and sends the browser to the authorization
// server, which answers the client (a code, or access_denied).
func (h *Handler) consent(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PostFormValue("id")
	agent := r.PostFormValue("agent")
	switch r.PostFormValue("decision") {
	case "vend":
		// A new agent for this client (the vend form), then approved as it.
		f, res, err := h.vendFromForm(r, v)
		if err != nil {
			if f.Errors != nil {
				h.renderConsent(w, r, v, http.StatusUnprocessableEntity, id, f)
				return
			}
			h.fail(w, r, v, err)
			return
		}
		agent = res.Agent.ID
		fallthrough
	case "approve":
		if err := h.signIns.ApproveOAuthRequest(r.Context(), v.person, id, agent); err != nil {
			h.fail(w, r, v, err)
			return
		}
	}
	http.Redirect(w, r, oauth.OAuthCallbackPath+"?id="+url.QueryEscape(id), http.StatusSeeOther)
}

// revokeSignIn revokes one client's sign-in as the agent: its tokens stop
// working and its sessions close on every instance.
func (h *Handler) revokeSignIn(w http.ResponseWriter, r *http.Request, v *visit) {
	ref := r.PathValue("ref")
	if err := h.signIns.RevokeOAuthGrant(r.Context(), v.person, ref, r.PathValue("id")); err != nil {
		h.fail(w, r, v, err)
		return
	}
	redirectDone(w, r, Prefix+"agents/"+url.PathEscape(ref), "signinrevoked")
}
