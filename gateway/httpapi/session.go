package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-gateway/cairn/gateway/dashboard"
)

// Sessions of the dashboard's login.
const (
	// sessionIdle is how long a session lasts after its last use.
	sessionIdle = 30 * 24 * time.Hour
	// sessionMaxAge is how long a session lasts at most after the login
	// that started it, however often it is used.
	sessionMaxAge = 90 * 24 * time.Hour
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
	mu  sync.Mutex         // guards ids
	ids map[string]session // by id
}

// session is the life of one session: it ends at idle, which each use
// moves to sessionIdle later, or at end, sessionMaxAge after the login,
// whichever comes first.
type session struct {
	idle, end time.Time
}

// expiry returns when s ends unless it is used again.
func (s session) expiry() time.Time {
	if s.end.Before(s.idle) {
		return s.end
	}
	return s.idle
}

// create returns a new random session id, valid from now.
func (s *sessions) create(now time.Time) string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = make(map[string]session)
	}
	for k, se := range s.ids {
		if !now.Before(se.expiry()) {
			delete(s.ids, k)
		}
	}
	for len(s.ids) >= maxSessions {
		var oldest string
		for k, se := range s.ids {
			if oldest == "" || se.idle.Before(s.ids[oldest].idle) {
				oldest = k
			}
		}
		delete(s.ids, oldest)
	}
	s.ids[id] = session{idle: now.Add(sessionIdle), end: now.Add(sessionMaxAge)}
	return id
}

// use reports whether id is a live session, extends it, and returns when
// it ends unless it is used again.
func (s *sessions) use(id string, now time.Time) (time.Time, bool) {
	if id == "" {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.ids[id]
	if !ok {
		return time.Time{}, false
	}
	if !now.Before(se.expiry()) {
		delete(s.ids, id)
		return time.Time{}, false
	}
	se.idle = now.Add(sessionIdle)
	s.ids[id] = se
	return se.expiry(), true
}

// remove ends the session id.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
}

// setSessionCookie sets the cookie of session id, to last until expiry,
// when the session ends unless it is used again.
func (g *Guard) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, expiry time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name:     dashboard.SessionCookie,
		Value:    id,
		Path:     "/",
		MaxAge:   max(1, int(time.Until(expiry)/time.Second)),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

// login answers POST /login: the form fields token and next. The right
// token starts a session (its cookie) and redirects to next, a path on
// this host; a wrong one answers the login form again with 401, and
// counts as a failed authentication of the client's address, which may
// then have to wait (429).
func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		g.refused.Inc("too_large")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "login form: " + err.Error()})
		return
	}
	next := dashboard.LocalPath(r.PostForm.Get("next"))
	key, now := clientKey(r), time.Now()
	if wait := g.failures.wait(key, now); wait > 0 {
		g.tooManyFailures(w, wait, next, true)
		return
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(r.PostForm.Get("token"))))
	if subtle.ConstantTimeCompare(sum[:], g.token[:]) != 1 {
		g.failed(r, key, now)
		g.refused.Inc("unauthorized")
		g.writeLogin(w, http.StatusUnauthorized, next, "That is not the token.")
		return
	}
	id := g.sessions.create(now)
	exp, _ := g.sessions.use(id, now)
	g.setSessionCookie(w, r, id, exp)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout answers POST /logout: it ends the session and redirects to /.
func (g *Guard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(dashboard.SessionCookie); err == nil {
		g.sessions.remove(c.Value)
	}
	clearSessionCookie(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// clearSessionCookie tells the browser to forget its session cookie.
func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: dashboard.SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
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
