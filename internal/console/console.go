package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi"
	"github.com/rollcall/rollcall/internal/oauth"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console/"

// Options configures the console. Only the service is required.
type Options struct {
	// Log receives errors that end in a 500 page. nil = slog.Default().
	Log *slog.Logger
	// Sessions counts open MCP sessions; nil = the count is shown as not
	// available.
	Sessions SessionCounter
	// SessionKey seals session cookies (console.session_key). Every
	// instance behind one load balancer needs the same key. Empty = a
	// random key per process: sessions end when it restarts.
	SessionKey []byte
	// SessionTTL is the absolute lifetime of a session; 0 = DefaultSessionTTL.
	SessionTTL time.Duration
	// SecureCookies marks cookies Secure even on plain-http requests (set
	// when public_url is https behind a TLS-terminating proxy). Requests
	// that arrive over TLS always get Secure cookies.
	SecureCookies bool
	// SignIns are the sign-in use cases behind the consent page and an
	// agent's sign-ins (design: Consent).
	SignIns *oauth.Grants
}

// Handler serves the console under Prefix. It is safe for concurrent use.
type Handler struct {
	svc      *app.Service
	signIns  *oauth.Grants
	log      *slog.Logger
	sessions SessionCounter
	sealer   *sealer
	ttl      time.Duration
	secure   bool
	pages    map[string]*template.Template
	asset    string // version of the static files, for cache busting
	mux      *http.ServeMux
}

// New parses the templates (once) and returns the console handler. Errors:
// a template that does not parse (a build defect) or no randomness for the
// session key.
func New(svc *app.Service, o Options) (*Handler, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	sl, err := newSealer(o.SessionKey)
	if err != nil {
		return nil, err
	}
	h := &Handler{svc: svc, signIns: o.SignIns, log: o.Log, sessions: o.Sessions,
		sealer: sl, ttl: o.SessionTTL, secure: o.SecureCookies, mux: http.NewServeMux()}
	if h.pages, err = parsePages(h.funcs()); err != nil {
		return nil, err
	}
	if h.asset, err = assetVersion(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix(Prefix+"static/", http.FileServer(http.FS(static)))
	h.mux.Handle("GET "+Prefix+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("v") == h.asset {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		fileServer.ServeHTTP(w, r)
	}))
	h.mux.HandleFunc("GET "+Prefix+"signin", h.signInPage)
	h.mux.HandleFunc("POST "+Prefix+"signin", h.signIn)
	h.mux.HandleFunc("POST "+Prefix+"signout", h.signOut)
	h.mux.Handle("GET "+Prefix+"{$}", h.page(h.fleetPage))
	h.mux.Handle("POST "+Prefix+"agents", h.form(h.vend))
	h.mux.Handle("GET "+Prefix+"agents/{ref}", h.page(h.agentPage))
	h.mux.Handle("GET "+Prefix+"agents/{ref}/card", h.fragment(h.cardFragment))
	h.mux.Handle("GET "+Prefix+"events", h.fragment(h.eventStream))
	h.mux.Handle("POST "+Prefix+"agents/{ref}/presence", h.form(h.setPresence))
	h.mux.Handle("POST "+Prefix+"agents/{ref}/shift", h.form(h.setShift))
	h.mux.Handle("POST "+Prefix+"agents/{ref}/self-clock-in-cap", h.form(h.setSelfClockInCap))
	h.mux.Handle("POST "+Prefix+"agents/{ref}/todos", h.form(h.pushTodo))
	h.mux.Handle("GET "+Prefix+"agents/{ref}/revoke", h.page(h.revokePage))
	h.mux.Handle("POST "+Prefix+"agents/{ref}/revoke", h.form(h.revoke))
	// Pools: pools.go.
	h.mux.Handle("GET "+Prefix+"pools", h.page(h.poolsPage))
	h.mux.Handle("GET "+Prefix+"pools/{name}", h.page(h.poolPage))
	// Tokens (everyone) and People (admins): team.go.
	h.mux.Handle("GET "+Prefix+"tokens", h.page(freshView(h.renderTokens)))
	h.mux.Handle("POST "+Prefix+"tokens", h.form(h.createToken))
	h.mux.Handle("POST "+Prefix+"tokens/{id}/revoke", h.form(h.revokeToken))
	h.mux.Handle("GET "+Prefix+"people", h.page(freshView(h.renderPeople)))
	h.mux.Handle("POST "+Prefix+"people", h.form(h.addPerson))
	h.mux.Handle("POST "+Prefix+"people/{id}", h.form(h.updatePerson))
	h.mux.Handle("POST "+Prefix+"handover", h.form(h.handOver))
	h.mux.Handle("GET "+ConsentPath, h.page(h.consentPage))
	h.mux.Handle("POST "+ConsentPath, h.form(h.consent))
	h.mux.Handle("POST "+Prefix+"agents/{ref}/signins/{id}/revoke", h.form(h.revokeSignIn))
	return h, nil
}

// csp is the console's Content Security Policy with the given form-action
// sources.
func csp(formAction string) string {
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'"
}

// ServeHTTP serves the console. Every response carries a strict Content
// Security Policy (scripts, styles and connections from this origin only;
// no framing), nosniff and a same-origin referrer policy.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp("'self'"))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.renderError(w, r, nil, http.StatusNotFound, "Not found", "There is no console page at this address.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// RedirectRoot answers "/" with a redirect to the console (mount it on
// "GET /{$}").
func RedirectRoot(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, Prefix, http.StatusFound)
}

// visit is a signed-in request: the person and their session.
type visit struct {
	person domain.Person
	sess   session
}

type visitFunc func(w http.ResponseWriter, r *http.Request, v *visit)

// authenticate opens the session cookie and checks the server-side session
// row it names, with its token and person (one indexed store read), so
// sign-out, a revoked or expired token and a deactivated person end the
// session at once on every instance.
func (h *Handler) authenticate(r *http.Request) (*visit, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil, false
	}
	s, err := h.sealer.open(c.Value, h.svc.Clock().Now())
	if err != nil {
		return nil, false
	}
	p, err := h.svc.ConsoleSession(r.Context(), s.ID)
	if err != nil || p.ID != s.PersonID {
		return nil, false
	}
	return &visit{person: p, sess: s}, true
}

// page wraps a GET page: without a session it redirects to sign-in.
func (h *Handler) page(fn visitFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := h.authenticate(r)
		if !ok {
			http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		fn(w, r, v)
	})
}

// fragment wraps a GET endpoint used by the page's script (card fragments,
// the event stream): without a session it answers 401.
func (h *Handler) fragment(fn visitFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := h.authenticate(r)
		if !ok {
			http.Error(w, "sign in again: the console session has ended", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		fn(w, r, v)
	})
}

// form wraps a state-changing POST: it needs a session and the session's
// synchronizer token in the form field "csrf"; otherwise it answers 403 and
// changes nothing.
func (h *Handler) form(fn visitFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
		v, ok := h.authenticate(r)
		if !ok {
			h.renderError(w, r, nil, http.StatusForbidden, "Signed out",
				"Your console session has ended, so nothing was changed. Sign in again and repeat the action.")
			return
		}
		if !sameToken(r.PostFormValue("csrf"), v.sess.CSRF) {
			h.renderError(w, r, v, http.StatusForbidden, "Request refused",
				"This form did not carry this session's security token (CSRF protection), so nothing was changed. Reload the page and try again.")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		fn(w, r, v)
	})
}

// --- sign-in and sign-out ---

type signInView struct {
	Token string // the double-submit token of the form
	Next  string
	Error string
}

func (h *Handler) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authenticate(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	h.renderSignIn(w, r, http.StatusOK, "")
}

func (h *Handler) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	http.SetCookie(w, h.cookie(r, SignInCookie, tok, 600))
	w.Header().Set("Cache-Control", "no-store")
	h.render(w, r, status, "signin", nil, "Sign in", signInView{Token: tok, Next: safeNext(r.FormValue("next")), Error: msg})
}

// signIn checks the double-submit token, authenticates the personal token
// and sets the session cookie. A wrong token re-renders the form with the
// error next to the field (401).
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	c, err := r.Cookie(SignInCookie)
	if err != nil || !sameToken(c.Value, r.PostFormValue("csrf")) {
		h.renderError(w, r, nil, http.StatusForbidden, "Request refused",
			"The sign-in form was not the one this server sent (CSRF protection, or cookies are blocked). Reload the sign-in page and try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	p, cs, err := h.svc.StartConsoleSession(r.Context(), token, h.ttl)
	if err != nil {
		if domain.CodeOf(err) != domain.CodeUnauthenticated {
			h.fail(w, r, nil, err)
			return
		}
		h.renderSignIn(w, r, http.StatusUnauthorized, "That token was not accepted. Paste a personal API token (it starts with "+app.PersonTokenPrefix+").")
		return
	}
	val, err := h.sealer.seal(session{PersonID: p.ID, ID: cs.ID, CSRF: randomToken(), Expires: cs.ExpiresAt.Unix()})
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, h.cookie(r, SessionCookie, val, int(h.ttl/time.Second)))
	http.SetCookie(w, h.cookie(r, SignInCookie, "", -1))
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// signOut ends the server-side session (on every instance: a copied cookie
// no longer opens anything) and clears the cookie. It needs the session's
// CSRF token, so another site cannot sign a person out.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if v, ok := h.authenticate(r); ok {
		if !sameToken(r.PostFormValue("csrf"), v.sess.CSRF) {
			h.renderError(w, r, v, http.StatusForbidden, "Request refused",
				"This form did not carry this session's security token (CSRF protection), so you are still signed in. Reload the page and try again.")
			return
		}
		if err := h.svc.EndConsoleSession(r.Context(), v.sess.ID); err != nil {
			h.fail(w, r, v, err)
			return
		}
	}
	http.SetCookie(w, h.cookie(r, SessionCookie, "", -1))
	http.Redirect(w, r, Prefix+"signin?done=signedout", http.StatusSeeOther)
}

// safeNext keeps redirects inside the console; a next with a backslash, a
// control character (tab and line breaks included) or a format character
// (bidi controls, zero-width …) is refused for the console's start page.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\t\r\n") || needsNeutralizing(next) {
		return Prefix
	}
	// No dot segments, plain or percent-encoded: /console/../v1/agents
	// would leave the console once the browser resolves it.
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return Prefix
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") {
		clean += "/"
	}
	if clean != u.Path || !strings.HasPrefix(clean, Prefix) {
		return Prefix
	}
	return next
}

// --- rendering ---

// pageData is what every page template receives.
type pageData struct {
	Title  string
	Person *domain.Person
	CSRF   string
	Asset  string
	Flash  string
	V      any
}

// freshView is the GET handler of a page that render shows with a view:
// the zero view (no form state, no new secret), status 200.
func freshView[V any](render func(http.ResponseWriter, *http.Request, *visit, int, V)) func(http.ResponseWriter, *http.Request, *visit) {
	return func(w http.ResponseWriter, r *http.Request, v *visit) {
		var zero V
		render(w, r, v, http.StatusOK, zero)
	}
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, v *visit, title string, view any) {
	d := pageData{Title: title, Asset: h.asset, Flash: flashes[r.URL.Query().Get("done")], V: view}
	if v != nil {
		d.Person, d.CSRF = &v.person, v.sess.CSRF
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := writeNeutral(w, func(w io.Writer) error { return h.pages[name].ExecuteTemplate(w, "layout", d) }); err != nil {
		h.log.Error("console template failed", "page", name, "err", err)
	}
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, v *visit, status int, title, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	h.render(w, r, status, "error", v, title, msg)
}

// fail renders a use-case error: a domain error as its status with its
// detail, anything else as a 500 (logged, detail hidden).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	var de *domain.Error
	if errors.As(err, &de) {
		st := httpapi.StatusOf(de.Code)
		h.renderError(w, r, v, st, http.StatusText(st), de.Detail)
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	h.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	h.renderError(w, r, v, http.StatusInternalServerError, "Something went wrong", "The server could not complete this request; it has been logged. Try again.")
}

// flashes are the fixed confirmations shown after a redirect (?done=…);
// no user input is ever reflected through them.
var flashes = map[string]string{
	"in":        "Clocked in.",
	"out":       "Clocked out.",
	"clear":     "Override cleared: the shift (or the default) decides again.",
	"shift":     "Shift saved.",
	"noshift":   "Shift removed.",
	"selfcap":   "Self clock-in cap saved.",
	"pushed":    "Todo pushed.",
	"exists":    "A live todo with that idempotency key already exists; nothing new was created.",
	"revoked":   "Agent revoked.",
	"signedout": "Signed out.",

	"tokenrevoked":  "Token revoked: everything using it stops within 5 s.",
	"personupdated": "Person updated.",
	"handedover":    "Agent handed over.",
	"signinrevoked": "Sign-in revoked: the client's tokens stop working and its sessions close within 5 s.",
}

// redirectDone answers a successful form with 303 to path?done=code.
func redirectDone(w http.ResponseWriter, r *http.Request, path, code string) {
	http.Redirect(w, r, path+"?done="+code, http.StatusSeeOther)
}

// parsePages parses the layout and partials once, then one clone per page.
func parsePages(funcs template.FuncMap) (map[string]*template.Template, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/card.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"signin", "fleet", "agent", "vended", "revoke", "error", "tokens", "people", "consent", "pools", "pool"} {
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(templateFS, "templates/"+name+".html")
		}
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	pages["card"] = base
	return pages, nil
}

// assetVersion hashes the static files for the ?v= cache-busting query.
func assetVersion() (string, error) {
	sum := sha256.New()
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		sum.Write([]byte(p))
		sum.Write(b)
		return err
	})
	return hex.EncodeToString(sum.Sum(nil))[:12], err
}

// cookie builds a console cookie: HttpOnly, SameSite=Strict, Path=/, and
// Secure when the request came over https (directly or, as reported by
// X-Forwarded-Proto, through a proxy) or the console was told its public URL
// is https. maxAge < 0 deletes the cookie.
func (h *Handler) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: h.secure || r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	}
}
