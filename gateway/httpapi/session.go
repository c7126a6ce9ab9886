package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// Sessions of the dashboard's login.
const (
	// sessionLifetime is how long a session lasts after its last use.
	sessionLifetime = 30 * 24 * time.Hour
	// maxSessions bounds the sessions kept; a new one beyond it drops
	// the one used longest ago.
	maxSessions = 64
	// maxLoginBody bounds the form of POST /login.
	maxLoginBody = 4 << 10
)

// sessions are the ids of the logged-in browsers, kept in memory only
// (a restart logs everyone out), each with its expiry. It is safe for
// concurrent use.
type sessions struct {
	mu  sync.Mutex           // guards ids
	ids map[string]time.Time // id → expiry
}

// create returns a new random session id valid until now+sessionLifetime.
func (s *sessions) create(now time.Time) string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = make(map[string]time.Time)
	}
	for k, exp := range s.ids {
		if !now.Before(exp) {
			delete(s.ids, k)
		}
	}
	for len(s.ids) >= maxSessions {
		var oldest string
		for k, exp := range s.ids {
			if oldest == "" || exp.Before(s.ids[oldest]) {
				oldest = k
			}
		}
		delete(s.ids, oldest)
	}
	s.ids[id] = now.Add(sessionLifetime)
	return id
}

// valid reports whether id is a live session, and extends it.
func (s *sessions) valid(id string, now time.Time) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.ids[id]
	if !ok {
		return false
	}
	if !now.Before(exp) {
		delete(s.ids, id)
		return false
	}
	s.ids[id] = now.Add(sessionLifetime)
	return true
}

// remove ends the session id.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
}

// session returns the cookie of r's session if it is live, and extends
// the session; nil if r has none.
func (g *Guard) session(r *http.Request) *http.Cookie {
	c, err := r.Cookie(dashboard.SessionCookie)
	if err != nil || !g.sessions.valid(c.Value, time.Now()) {
		return nil
	}
	return c
}

// setSessionCookie sets the cookie of session id, to last
// sessionLifetime.
func (g *Guard) setSessionCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{
		Name:     dashboard.SessionCookie,
		Value:    id,
		Path:     "/",
		MaxAge:   int(sessionLifetime / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

// login answers POST /login: the form fields token and next. The right
// token starts a session (its cookie) and redirects to next, a path on
// this host; a wrong one answers the login form again with 401.
func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	if g.limited(w) {
		return
	}
	if !g.logins.Allow() {
		g.tooMany(w)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		g.refused.WithLabelValues("too_large").Inc()
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "login form: " + err.Error()})
		return
	}
	next := dashboard.LocalPath(r.PostForm.Get("next"))
	sum := sha256.Sum256([]byte(r.PostForm.Get("token")))
	if subtle.ConstantTimeCompare(sum[:], g.token[:]) != 1 {
		g.refused.WithLabelValues("unauthorized").Inc()
		g.writeLogin(w, http.StatusUnauthorized, next, "That is not the token.")
		return
	}
	g.setSessionCookie(w, r, g.sessions.create(time.Now()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout answers POST /logout: it ends the session and redirects to /.
func (g *Guard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(dashboard.SessionCookie); err == nil {
		g.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: dashboard.SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// writeLogin answers the login form with code.
func (g *Guard) writeLogin(w http.ResponseWriter, code int, next, msg string) {
	var buf bytes.Buffer
	if err := dashboard.WriteLogin(&buf, dashboard.LoginPage{Next: next, Error: msg}); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeHTML(w, code, g.csp, buf.Bytes())
}
